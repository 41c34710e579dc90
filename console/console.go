// Package console serves the operator's console: four static files that
// ask for a token and then drive the admin API from the browser,
// with the same calls and the same token a script uses, so the console can
// do nothing the API does not allow.
//
// It imports nothing of the bridge. Every answer carries a
// Content-Security-Policy that lets the page run only its own script and
// talk only to its own origin, and forbids framing: a last error or a
// receiver's answer that holds markup is shown as text by the script, and
// would not run even if it were not.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Policy is the Content-Security-Policy of every answer: nothing inline,
// nothing evaluated, nothing from another origin, no framing, no form
// posted anywhere.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console at the root of what it is given; mount it
// with http.StripPrefix. The page loads without a token: it holds no
// data, and asks for the token before it calls the API.
func Handler() http.Handler {
	root, err := fs.Sub(files, "static")
	if err != nil {
		panic("console: " + err.Error()) // the embedded tree is fixed at build time
	}
	serve := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// The files change with the binary; no-cache makes the browser ask
		// again rather than run an older script against a newer API.
		h.Set("Cache-Control", "no-cache")
		serve.ServeHTTP(w, r)
	})
}
