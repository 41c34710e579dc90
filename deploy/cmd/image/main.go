// Command image builds the bridge's OCI image into an archive and prints
// its digest as its last line:
//
//	go run ./cmd/image -module .. -version v1.2.3 -o ../bin/bridge-image.tar
//
// No container daemon and no base image are involved; see package image.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jetstream-bridge/bridge/deploy/image"
)

func main() {
	var o image.Options
	out := flag.String("o", "bridge-image.tar", "the OCI archive to write")
	flag.StringVar(&o.Module, "module", "..", "directory of the bridge's Go module")
	flag.StringVar(&o.Version, "version", "dev", "the version stamped into the binary and the image's labels")
	flag.StringVar(&o.Arch, "arch", "", "GOARCH of the image (default the build machine's)")
	flag.StringVar(&o.CACerts, "ca-certs", image.CACerts, "CA certificate bundle to copy into the image")
	flag.StringVar(&o.Name, "name", "", "reference name in the archive, which podman load tags (default jetstream-bridge:<version>)")
	epoch := flag.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds dated on every entry and in the config (default $SOURCE_DATE_EPOCH, else 0)")
	flag.Parse()
	if o.Name == "" {
		o.Name = "jetstream-bridge:" + o.Version
	}
	secs := int64(0)
	if *epoch != "" {
		var err error
		if secs, err = strconv.ParseInt(*epoch, 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "image: -created %q is not Unix seconds\n", *epoch)
			os.Exit(2)
		}
	}
	o.Created = time.Unix(secs, 0).UTC()
	digest, err := image.Build(context.Background(), o, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (%s)\n", *out, o.Name)
	fmt.Println(digest)
}
