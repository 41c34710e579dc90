package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	defaultAdminURL = "http://127.0.0.1:8480"
	defaultDataDir  = "./bridge-data"
	// adminTokenFile is where "bridge run" writes the token it generates.
	adminTokenFile = "admin-token"
	// adminTimeout bounds one admin call; a create may wait up to 5 s on
	// the URL guard's name resolution.
	adminTimeout = 30 * time.Second
	// maxAnswerBytes bounds what the client reads of one answer.
	maxAnswerBytes = 64 << 20
)

// clientFlags are the flags every admin subcommand shares.
type clientFlags struct {
	adminURL   string
	adminToken string
	adminCA    string
	dataDir    string
	json       bool
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	c := &clientFlags{}
	fs.StringVar(&c.adminURL, "admin-url", defaultAdminURL, "admin API base URL")
	fs.StringVar(&c.adminToken, "admin-token", "", "admin API bearer token (default: <data-dir>/admin-token)")
	fs.StringVar(&c.adminCA, "admin-ca", "", "PEM CA certificate file to trust for an https:// --admin-url, instead of the system's roots")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir, "the daemon's data directory, for its admin-token file")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON answer")
	return c
}

// client builds the admin API client. The token comes from --admin-token
// (or BRIDGE_ADMIN_TOKEN, through parseFlags), else from the file the
// daemon generated.
func (c *clientFlags) client() (*adminClient, error) {
	base, err := url.Parse(strings.TrimRight(c.adminURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, usagef("--admin-url must be an http or https URL such as %s", defaultAdminURL)
	}
	token := c.adminToken
	if token == "" {
		path := filepath.Join(c.dataDir, adminTokenFile)
		raw, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("no admin token: pass --admin-token, set BRIDGE_ADMIN_TOKEN, or point --data-dir at the daemon's data directory (%s does not exist)", path)
		case err != nil:
			return nil, fmt.Errorf("reading the admin token: %w", err)
		}
		token = strings.TrimSpace(string(raw))
	}
	trust, err := adminCA(c.adminCA)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: adminTimeout}
	if trust != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = trust
		hc.Transport = tr
	}
	return &adminClient{base: base.String(), token: token, http: hc}, nil
}

// adminClient calls the admin API.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is an error answer of the admin API. Its message is the API's
// own: it names the field and the problem.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

// call sends one request and returns the answer's body; an error answer
// becomes an *apiError. body, when not nil, is sent as JSON.
func (c *adminClient) call(ctx context.Context, method, path string, body any, header http.Header) ([]byte, error) {
	_, data, err := c.exchange(ctx, method, path, body, header)
	return data, err
}

// exchange is call for an answer whose headers matter too.
func (c *adminClient) exchange(ctx context.Context, method, path string, body any, header http.Header) (http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("building the request: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which is named once below
		}
		return nil, nil, fmt.Errorf("cannot reach the admin API at %s: %w%s", c.base, err, tlsHint(err))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	if err := plainToTLS(c.base, res.StatusCode, data); err != nil {
		return nil, nil, err
	}
	if res.StatusCode >= 300 {
		return nil, nil, answerError(res.StatusCode, data)
	}
	return res.Header, data, nil
}

// answerError reads an error answer, or describes one that is not the
// API's JSON (a proxy's page, say).
func answerError(status int, data []byte) error {
	var body struct {
		Error apiError `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		body.Error.Status = status
		return &body.Error
	}
	preview := strings.TrimSpace(string(data))
	if len(preview) > 200 {
		preview = preview[:200] + "..."
	}
	return &apiError{Status: status, Code: "unknown", Message: fmt.Sprintf("admin API answered %d %s: %s",
		status, http.StatusText(status), preview)}
}

// decodeAnswer decodes an answer the API documents.
func decodeAnswer(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the admin API's answer is not what this client expects: %w", err)
	}
	return nil
}

// pool keeps up to n connections to the API alive, for a command that
// makes n calls at once: the default transport keeps two, and would dial
// anew for most of them.
func (c *adminClient) pool(n int) {
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.MaxIdleConnsPerHost = n
	c.http.Transport = tr
}
