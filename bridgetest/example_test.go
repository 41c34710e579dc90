package bridgetest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/jetstream-bridge/bridge/bridgetest"
)

// exampleTB is what a test's *testing.T gives bridgetest, for running an
// Env outside a test: in a test, pass t itself.
type exampleTB struct {
	testing.TB // the methods bridgetest does not call are left unset
	cleanups   []func()
	failed     bool
}

func (t *exampleTB) Helper()             {}
func (t *exampleTB) Cleanup(f func())    { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Failed() bool        { return t.failed }
func (t *exampleTB) Logf(string, ...any) {}
func (t *exampleTB) Errorf(format string, args ...any) {
	t.failed = true
	fmt.Printf(format+"\n", args...)
}
func (t *exampleTB) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic("bridgetest: example failed")
}

func (t *exampleTB) TempDir() string {
	dir, err := os.MkdirTemp("", "bridgetest-example")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// end runs the cleanups, last first, as a test's end does.
func (t *exampleTB) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// Testing a receiver: the bridge delivers what is published to the
// journal as a signed CloudEvent, retrying a 503 until it is accepted.
func Example() {
	t := &exampleTB{}
	defer t.end()

	env := bridgetest.New(t)
	shipping := env.Receiver(bridgetest.Response{Status: 503, RetryAfter: "1"}, bridgetest.Response{Status: 200})
	env.Register(shipping.Outbox("journal.orders.>"))
	env.Publish("journal.orders.42", []byte(`{"order":42}`), "Content-Type", "application/json")

	got := shipping.WaitFor(1)
	bridgetest.AssertSigned(t, shipping.All())
	for _, d := range shipping.All() {
		fmt.Println("answered", d.Status, "to", d.Event.Subject(), string(d.Event.Data()))
	}
	fmt.Println("accepted:", len(got), "signed:", got[0].SignatureErr == nil)
	// Output:
	// answered 503 to journal.orders.42 {"order":42}
	// answered 200 to journal.orders.42 {"order":42}
	// accepted: 1 signed: true
}
