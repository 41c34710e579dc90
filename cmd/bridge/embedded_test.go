package main

import (
	"os"
	"strings"
	"testing"
)

// A cluster address or route the embedded server could not use stops
// `bridge run` with exit 2 and the flag's name, before anything starts.
func TestRunRefusesBadEmbeddedCluster(t *testing.T) {
	cleanEnv(t)
	for flags, want := range map[string]string{
		"--embedded-cluster 6222":                                                                 `--embedded-cluster "6222"`,
		"--embedded-cluster 127.0.0.1:http":                                                       `--embedded-cluster "127.0.0.1:http": port "http" is not a number`,
		"--embedded-cluster 127.0.0.1:0":                                                          `--embedded-cluster "127.0.0.1:0": port "0"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes 127.0.0.1:6223":                      `--embedded-routes "127.0.0.1:6223"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://127.0.0.1:6223,http://h:6224": `--embedded-routes "http://h:6224": want nats://HOST:PORT`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://h":                            `--embedded-routes "nats://h"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://u:p@h:6223":                   `--embedded-routes "nats://u:p@h:6223": want nats://HOST:PORT`,
		"--embedded-routes nats://h:6223":                                                         "--embedded-routes needs --embedded-cluster",
		"--embedded-cluster 127.0.0.1:6222 --nats-url nats://127.0.0.1:4222":                      "--nats-url (or NATS_URL) replaces",
		"--embedded-name a/b":                                                                     `--embedded-name "a/b"`,
	} {
		dir := t.TempDir()
		t.Run(flags, func(t *testing.T) {
			cli(t, "", append([]string{"run", "--data-dir", dir}, strings.Fields(flags)...)...).want(t, 2, want)
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%d files left in the data directory", len(left))
			}
		})
	}
}
