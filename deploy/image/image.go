// Package image builds the bridge's OCI image without a container daemon
// and without a base image: a static bridge binary, the build machine's CA
// certificates and an /etc/passwd naming a non-root user, in two layers
// whose every entry has a fixed owner, mode and time, so one commit built
// twice gives one digest.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image promises its users; the chart and the tests read these.
const (
	UserName  = "bridge"
	UID       = 65532
	DataDir   = "/data"
	Binary    = "/bridge"
	AdminPort = 8480
	// CACerts is where the image keeps the CA certificates, the first
	// place Go's crypto/x509 looks on Linux.
	CACerts = "/etc/ssl/certs/ca-certificates.crt"
)

// Options say what to build.
type Options struct {
	// Module is the directory of the bridge's Go module (go.mod of
	// github.com/jetstream-bridge/bridge).
	Module string
	// Version is stamped into the binary (bridge version) and the image's
	// labels.
	Version string
	// Arch is the GOARCH of the binary and the image; empty is the build
	// machine's.
	Arch string
	// CACerts is the bundle of CA certificates copied into the image;
	// empty is the build machine's /etc/ssl/certs/ca-certificates.crt.
	CACerts string
	// Created is the time of every entry, the history and the config:
	// fixed (the commit's time, or the Unix epoch) so builds repeat.
	Created time.Time
	// Name is the image's reference name in the archive's index
	// (org.opencontainers.image.ref.name), which podman load tags it with.
	Name string
}

// Build compiles the bridge, assembles the image and writes it to out as
// an OCI archive (an OCI image layout in a tar file, as `podman load` and
// `docker load` read). It returns the manifest's digest.
func Build(ctx context.Context, o Options, out string) (v1.Hash, error) {
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.CACerts == "" {
		o.CACerts = CACerts
	}
	tmp, err := os.MkdirTemp("", "bridge-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bridge")
	if err := buildBinary(ctx, o, bin); err != nil {
		return v1.Hash{}, err
	}
	img, err := Assemble(o, bin)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeArchive(img, o.Name, filepath.Join(tmp, "layout"), out, o.Created); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// buildBinary builds a static bridge: no cgo, paths trimmed, no VCS stamp
// nor build id, so the bytes depend on the source and the toolchain only.
func buildBinary(ctx context.Context, o Options, bin string) error {
	ldflags := "-s -w -buildid= -X main.version=" + o.Version
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "./cmd/bridge")
	cmd.Dir = o.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch, "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the bridge in %s: %w", o.Module, err)
	}
	return nil
}

// Assemble makes the image of the binary at bin: a base layer (users, CA
// certificates, /data) and the binary's layer.
func Assemble(o Options, bin string) (v1.Image, error) {
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	root := &entry{dir: true, mode: 0o755}
	base := []file{
		{"etc", root, nil},
		{"etc/passwd", &entry{mode: 0o644}, []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, UID, UserName, DataDir))},
		{"etc/group", &entry{mode: 0o644}, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UID))},
		{"etc/ssl", root, nil},
		{"etc/ssl/certs", root, nil},
		{strings.TrimPrefix(CACerts, "/"), &entry{mode: 0o644}, certs},
		{strings.TrimPrefix(DataDir, "/"), &entry{dir: true, mode: 0o700, uid: UID}, nil},
		{"tmp", &entry{dir: true, mode: 0o1777}, nil},
	}
	app := []file{{strings.TrimPrefix(Binary, "/"), &entry{mode: 0o755}, binary}}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range []struct {
		files []file
		what  string
	}{
		{base, "/etc/passwd and /etc/group with user " + UserName + " (" + fmt.Sprint(UID) + "), CA certificates, " + DataDir},
		{app, Binary + " " + o.Version + " (static, -trimpath)"},
	} {
		layer, err := tarLayer(l.files, o.Created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "deploy/image: " + l.what},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint:   []string{Binary},
		Cmd:          []string{"run"},
		WorkingDir:   DataDir,
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", AdminPort): {}},
		Env: []string{
			"PATH=/",
			"SSL_CERT_FILE=" + CACerts,
			// In a container the defaults of a workstation (./bridge-data,
			// the admin API on loopback only) serve nobody; flags win.
			"BRIDGE_DATA_DIR=" + DataDir,
			fmt.Sprintf("BRIDGE_ADMIN_LISTEN=0.0.0.0:%d", AdminPort),
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "jetstream-bridge",
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.source":  "https://github.com/jetstream-bridge/bridge",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// entry is a tar entry's metadata; every other field is fixed.
type entry struct {
	dir  bool
	mode int64
	uid  int
}

type file struct {
	name string
	*entry
	data []byte
}

// tarLayer is a gzipped tar of files in name order, every entry owned as
// given and dated at created.
func tarLayer(files []file, created time.Time) (v1.Layer, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeArchive writes img as an OCI image layout in dir, then tars dir
// into out with fixed metadata, in name order.
func writeArchive(img v1.Image, name, dir, out string, created time.Time) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if name != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": name}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return err
	}
	var names []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	tw := tar.NewWriter(f)
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: created, Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
			err = tw.WriteHeader(h)
		} else {
			err = copyFile(tw, h, filepath.Join(dir, n), fi.Size())
		}
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

func copyFile(tw *tar.Writer, h *tar.Header, path string, size int64) error {
	h.Typeflag, h.Size = tar.TypeReg, size
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
