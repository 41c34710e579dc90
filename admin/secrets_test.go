package admin

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestSecretsNeverInAnswers registers distinctive secrets, tokens and
// credentials, drives every route — successes and refusals — and greps
// every answer and every log line for them.
func TestSecretsNeverInAnswers(t *testing.T) {
	const (
		keyText     = "SIGNING-KEY-distinctive-0042!"
		token       = "A2A-TOKEN-distinctive-7731"
		credentials = "CREDENTIALS-distinctive-9924"
	)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(keyText))
	leaks := []string{keyText, strings.TrimPrefix(secret, "whsec_"), token, credentials, "distinctive"}

	h := newHarness(t)
	var answers []response
	send := func(method, path, body string, headers ...string) {
		answers = append(answers, h.do(method, path, body, headers...))
	}
	outbox := `{"id":"ob","namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":"` + secret +
		`","authentication":{"scheme":"Bearer","credentials":"` + credentials + `"}}`
	a2a := `{"id":"aa","namespace":"a2a","taskId":"t","url":"https://agent.example/","secret":"` + secret +
		`","token":"` + token + `","authentication":{"scheme":"Basic","credentials":"` + credentials + `"}}`

	send("POST", "/v1/registrations", outbox, "Idempotency-Key", "leak-1")
	send("POST", "/v1/registrations", outbox, "Idempotency-Key", "leak-1")
	send("POST", "/v1/registrations", outbox)
	send("POST", "/v1/registrations", a2a)
	send("GET", "/v1/registrations", "")
	send("GET", "/v1/registrations/ob", "")
	send("GET", "/v1/registrations/aa", "")
	send("PUT", "/v1/registrations/aa", a2a)
	send("PUT", "/v1/registrations/ob", outbox)
	send("PUT", "/v1/registrations/ob?dryRun=true", strings.Replace(outbox, secret, otherSecret, 1))
	send("POST", "/v1/registrations?dryRun=true", strings.Replace(outbox, `"id":"ob"`, `"id":"ob2"`, 1))
	send("POST", "/v1/registrations?dryRun=true", outbox)
	send("POST", "/v1/plan", `{"registrations":[`+outbox+`,`+strings.Replace(a2a, `"a2a"`, `"outbox"`, 1)+`,`+
		strings.Replace(outbox, secret, "whsec_"+keyText, 1)+`]}`)
	_ = h.store.Park(t.Context(), "ob", "receiver answered 500")
	send("POST", "/v1/registrations/ob/unpark", "")
	send("POST", "/v1/registrations/ob/rewind", `{"seq":1}`)
	send("POST", "/v1/registrations/aa/unpark", "")
	send("POST", "/v1/purge", `{"completedOlderThan":"1h"}`)

	// Refusals that carry the secrets in the request.
	send("POST", "/v1/registrations", strings.Replace(outbox, `"id":"ob"`, `"id":"ob","extra":1`, 1))
	send("POST", "/v1/registrations", strings.Replace(outbox, "https://a.example/", "https://refused.example/", 1))
	send("POST", "/v1/registrations", strings.Replace(outbox, `"journal.x"`, `"journal..x"`, 1))
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":"whsec_`+keyText+`"}`)
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":"`+keyText+`"}`)
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","token":"`+token+`"}`)
	send("POST", "/v1/registrations", `{"namespace":"a2a","taskId":"t","url":"https://agent.example/","token":"`+token+"\\n"+`"}`)
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","authentication":{"scheme":"`+credentials+` x","credentials":"`+credentials+`\r"}}`)
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://`+credentials+`@a.example/"}`)
	send("POST", "/v1/registrations", `{"namespace":"outbox","subject":"journal.x","url":"https://a.example/","secret":["`+secret+`"]}`)
	send("POST", "/v1/registrations", outbox+`trailing`)
	send("PUT", "/v1/registrations/aa", strings.Replace(a2a, `"a2a"`, `"outbox"`, 1))
	send("GET", "/v1/registrations", "", "Authorization", "Bearer "+credentials)

	for i, res := range answers {
		for _, leak := range leaks {
			if strings.Contains(string(res.body), leak) {
				t.Errorf("answer %d (status %d) contains %q: %s", i, res.status, leak, res.body)
			}
		}
	}
	logs := h.logs.String()
	for _, leak := range leaks {
		if strings.Contains(logs, leak) {
			t.Errorf("logs contain %q:\n%s", leak, logs)
		}
	}
	if stored, _ := h.store.Get(t.Context(), "aa"); stored.Token != token || stored.AuthCredentials != credentials || stored.Secret != secret {
		t.Fatal("the secrets did not reach the store, so this test proves nothing")
	}
}
