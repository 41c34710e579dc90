package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/jetstream-bridge/bridge/daemon"
)

// Embedding the bridge in a program: an embedded NATS server and the
// admin API on ports the kernel picks, state in a directory of the
// program's, stopped with the program's context.
func Example() {
	dir, err := os.MkdirTemp("", "bridge")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	cfg := daemon.DefaultConfig()
	cfg.DataDir = dir
	cfg.EmbeddedListen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.HeapFloor = 0 // the program's collector is its own business
	d, err := daemon.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		panic(err)
	}

	req, _ := http.NewRequest("GET", d.AdminURL()+"/v1/registrations", nil)
	req.Header.Set("Authorization", "Bearer "+d.AdminToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("admin API:", resp.Status)
	ready, err := http.Get(d.AdminURL() + "/readyz")
	if err != nil {
		panic(err)
	}
	ready.Body.Close()
	fmt.Println("ready:", ready.Status)

	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// admin API: 200 OK
	// ready: 200 OK
	// stopped: <nil>
}
