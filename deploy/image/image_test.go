package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// The image is built twice from the module above: the same digest and the
// same archive bytes; then unpacked layer by layer, its config read, its
// binary run from the unpacked root and answering /readyz.
func TestImage(t *testing.T) {
	ctx := context.Background()
	o := Options{Module: "../..", Version: "v0.0.0-test", Created: time.Unix(1700000000, 0).UTC(), Name: "jetstream-bridge:test"}
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.tar"), filepath.Join(dir, "second.tar")
	d1, err := Build(ctx, o, first)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Build(ctx, o, second)
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 || fileSum(t, first) != fileSum(t, second) {
		t.Fatalf("two builds differ: digests %s and %s, archives %s and %s", d1, d2, fileSum(t, first), fileSum(t, second))
	}
	t.Logf("digest %s, twice", d1)

	img := readArchive(t, first, dir, d1)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != fmt.Sprintf("%d:%d", UID, UID) || UID == 0 {
		t.Errorf("user %q, want %d:%d, not root", c.User, UID, UID)
	}
	if !slices.Equal(c.Entrypoint, []string{Binary}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("entrypoint %q cmd %q, want [%s] [run]", c.Entrypoint, c.Cmd, Binary)
	}
	if _, ok := c.ExposedPorts[fmt.Sprintf("%d/tcp", AdminPort)]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want the admin port %d/tcp", c.ExposedPorts, AdminPort)
	}
	if cf.OS != "linux" || !cf.Created.Time.Equal(o.Created) {
		t.Errorf("os %q created %v, want linux and %v", cf.OS, cf.Created, o.Created)
	}

	root := filepath.Join(dir, "root")
	owners := unpack(t, img, root)
	if owners["data"] != UID {
		t.Errorf("/data owned by %d, want %d", owners["data"], UID)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if want := fmt.Sprintf("%s:x:%d:%d:", UserName, UID, UID); !strings.Contains(string(passwd), want) {
		t.Errorf("/etc/passwd %q has no line %q", passwd, want)
	}
	if certs, err := os.ReadFile(filepath.Join(root, CACerts)); err != nil || !strings.Contains(string(certs), "BEGIN CERTIFICATE") {
		t.Errorf("%s: %v, want the CA certificates", CACerts, err)
	}

	bin := filepath.Join(root, Binary)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "bridge "+o.Version+" ") {
		t.Fatalf("bridge version: %q, %v", out, err)
	}
	runReady(t, bin, c, filepath.Join(root, "data"))
	t.Run("podman", func(t *testing.T) { podmanRun(t, first, o.Name, d1) })
}

// podmanRun loads the archive into podman, wants the digest and user it
// was built with, and runs it until /readyz answers. Where podman is
// missing, or may not start containers (a sandbox refusing crun's
// setrlimit), it says so and skips that part.
func podmanRun(t *testing.T, archive, name string, digest v1.Hash) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("no podman on PATH; the unpacked image ran above")
	}
	podman := func(args ...string) (string, error) {
		out, err := exec.Command("podman", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := podman("load", "-i", archive); err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	ref := "localhost/" + name
	t.Cleanup(func() { podman("rmi", "-f", ref) })
	out, err := podman("inspect", ref, "--format", "{{.Digest}} {{.Config.User}}")
	if want := fmt.Sprintf("%s %d:%d", digest, UID, UID); err != nil || out != want {
		t.Fatalf("podman inspect: %q (%v), want %q", out, err, want)
	}
	admin := freePort(t)
	out, err = podman("run", "--rm", "-d", "-p", admin+":8480", ref)
	if err != nil && strings.Contains(out, "setrlimit") {
		t.Skipf("podman loaded the image, but this machine may not run containers: %s", out)
	}
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	id := out
	t.Cleanup(func() { podman("stop", "-t", "15", id) })
	waitReady(t, admin, func() error { return nil }, func() string {
		logs, _ := podman("logs", id)
		return logs
	})
}

// runReady runs the image's entrypoint and command with its environment,
// the data directory and listeners moved to where this machine has room
// (the root filesystem is not chrooted into), and waits for /readyz.
func runReady(t *testing.T, bin string, c v1.Config, data string) {
	admin, nats := freePort(t), freePort(t)
	args := append(slices.Clone(c.Cmd), "--data-dir", data, "--admin-listen", admin, "--embedded-listen", nats)
	cmd := exec.Command(bin, args...)
	cmd.Env = c.Env
	var logs testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("bridge run after SIGTERM: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("bridge run did not stop within 30 s of SIGTERM\n%s", logs.String())
		}
	}()
	waitReady(t, admin, func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("bridge run exited before it was ready: %v", err)
		default:
			return nil
		}
	}, logs.String)
}

// waitReady polls /readyz at admin until it answers 200, for 60 s at
// most; dead says whether the server ended first, logs what it said.
func waitReady(t *testing.T, admin string, dead func() error, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if derr := dead(); derr != nil {
			t.Fatalf("%v\n%s", derr, logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 60 s (last %v)\n%s", err, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func fileSum(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// readArchive untars the OCI archive and returns its one image, which
// must have the digest Build reported.
func readArchive(t *testing.T, archive, dir string, digest v1.Hash) v1.Image {
	lay := filepath.Join(dir, "layout")
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	extract(t, tar.NewReader(f), lay, nil)
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != digest {
		t.Fatalf("the archive's index lists %+v, want the one image %s", m.Manifests, digest)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// unpack extracts the image's layers in order into root, as a container
// runtime lays them, and returns the owner of every entry.
func unpack(t *testing.T, img v1.Image, root string) map[string]int {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 {
		t.Errorf("%d layers, want 2 (the base, the binary)", len(layers))
	}
	owners := map[string]int{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		extract(t, tar.NewReader(rc), root, owners)
		rc.Close()
	}
	return owners
}

func extract(t *testing.T, tr *tar.Reader, root string, owners map[string]int) {
	t.Helper()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			t.Fatalf("entry %q leaves the root", h.Name)
		}
		if owners != nil {
			owners[name] = h.Uid
		}
		path := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, os.FileMode(h.Mode).Perm())
		default:
			t.Fatalf("entry %q of type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
