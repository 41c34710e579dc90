package runflags

import (
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/daemon"
)

// Every daemon.Config field a flag sets has that flag in Names, so
// no daemon error reaches an operator naming a Go field.
func TestEveryConfigFieldHasItsFlag(t *testing.T) {
	fs, _ := New(io.Discard)
	names := Names()
	hostOnly := map[string]bool{"Registerer": true, "Conn": true, "TracerProvider": true, "Version": true}
	for f := range reflect.TypeFor[daemon.Config]().Fields() {
		name, ok := names[f.Name]
		switch {
		case hostOnly[f.Name]:
			if ok {
				t.Errorf("%s, which only a program can give, has flag --%s", f.Name, name)
			}
		case !ok:
			t.Errorf("Config.%s has no flag in Names", f.Name)
		case fs.Lookup(name) == nil:
			t.Errorf("Config.%s maps to --%s, which bridge run does not have", f.Name, name)
		}
	}
}

// --max-in-flight bounds the POSTs of the whole bridge (CONTRACT §12),
// and defaults to the engine's own bound.
func TestMaxInFlightIsTheBridgesBound(t *testing.T) {
	fs, _ := New(io.Discard)
	f := fs.Lookup("max-in-flight")
	if f.DefValue != strconv.Itoa(bridge.DefaultMaxInFlight) {
		t.Errorf("--max-in-flight defaults to %s, want bridge.DefaultMaxInFlight %d", f.DefValue, bridge.DefaultMaxInFlight)
	}
	if !strings.Contains(f.Usage, "POSTs of the whole bridge") || !strings.Contains(f.Usage, "without ordering takes one") {
		t.Errorf("--max-in-flight says %q", f.Usage)
	}
}
