package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// createBurst is 16 clients creating registrations as fast as the bridge
// answers, each remembering the ids answered 201, until the bridge is
// gone.
type createBurst struct {
	mu       sync.Mutex
	answered []string
	wg       sync.WaitGroup
}

func startCreateBurst(d *chaosDaemon, run int) *createBurst {
	b := &createBurst{}
	token := d.token()
	client := &http.Client{Timeout: 10 * time.Second}
	for c := range 16 {
		b.wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("run%d-client%02d-%06d", run, c, i)
				body := `{"id":"` + id + `","namespace":"outbox","subject":"journal.>","url":"https://receiver.example/"}`
				req, _ := http.NewRequest("POST", "http://"+d.admin+"/v1/registrations", bytes.NewReader([]byte(body)))
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := client.Do(req)
				if err != nil {
					return // killed
				}
				res.Body.Close()
				if res.StatusCode == http.StatusCreated {
					b.mu.Lock()
					b.answered = append(b.answered, id)
					b.mu.Unlock()
				}
			}
		})
	}
	return b
}

func (b *createBurst) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.answered)
}

// A 201 is sent only once the create is committed: SIGKILL in the middle
// of a burst of creates from 16 clients, which the store commits in
// groups, loses none of those answered. Three kills, each once a thousand
// creates of its burst are answered, wherever the commits stand then.
func TestKillNineDuringCreatesKeepsEveryAnsweredCreate(t *testing.T) {
	d := newChaosDaemon(t)
	d.start()
	for run := range 3 {
		b := startCreateBurst(d, run)
		waitFor(t, 60*time.Second, "1,000 creates answered", func() bool { return b.count() >= 1000 })
		d.kill9()
		b.wg.Wait()
		d.start()

		listed, ok := listState(d, "")
		if !ok {
			t.Fatalf("after kill %d: listing the registrations failed", run+1)
		}
		stored := make(map[string]bool, len(listed))
		for _, r := range listed {
			stored[r.ID] = true
		}
		lost := 0
		for _, id := range b.answered {
			if !stored[id] {
				lost++
				t.Errorf("after kill %d: %s was answered 201 and is gone", run+1, id)
			}
		}
		t.Logf("kill %d: %d creates answered 201, %d registrations stored, %d lost", run+1, len(b.answered), len(listed), lost)
	}
}
