package embedding

import (
	"bytes"
	"context"
	"testing"
)

func TestSentenceEmbedderRelatesParaphrases(t *testing.T) {
	e := SentenceEmbedder{}
	if e.Model() != "builtin-use-lite-f16" || e.Dimensions() != 512 {
		t.Fatalf("model %s, %d dimensions", e.Model(), e.Dimensions())
	}
	texts := []string{
		"is it going to rain tomorrow",
		"get current weather conditions and the forecast",
		"create a GitHub issue",
		"email the quarterly report to the finance team",
		"send a message to a recipient by mail",
	}
	v, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// The case a lexical embedder cannot get: no shared words.
	if near, far := Cosine(v[0], v[1]), Cosine(v[0], v[2]); near <= far {
		t.Errorf("rain/weather %.3f ≤ rain/github %.3f", near, far)
	}
	if near, far := Cosine(v[3], v[4]), Cosine(v[3], v[0]); near <= far {
		t.Errorf("email/mail %.3f ≤ email/rain %.3f", near, far)
	}
	t.Logf("cos(rain, weather) %.3f, cos(rain, github) %.3f, cos(email, mail) %.3f", Cosine(v[0], v[1]), Cosine(v[0], v[2]), Cosine(v[3], v[4]))

	again, err := e.Embed(context.Background(), texts[:1])
	if err != nil || !bytes.Equal(vectorBytes(again[0]), vectorBytes(v[0])) {
		t.Fatal("not deterministic")
	}
	if _, err := e.Embed(context.Background(), []string{"ok", "  "}); KindOf(err) != KindInvalidInput {
		t.Fatalf("blank text: %v", err)
	}
}
