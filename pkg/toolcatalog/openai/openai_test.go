package openai

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

func TestEmbedSendsTheCatalogsModelAndKeepsInputOrder(t *testing.T) {
	srv := openaitest.New(t)
	srv.APIKeys = []string{"sk-test"}
	srv.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
		// Answer in reverse order: the client must put them back.
		openaitest.WriteEmbeddings(w, req, *req.Dimensions, func(items []openaitest.EmbeddingItem) { slices.Reverse(items) })
	}
	e, err := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "text-embedding-3-small", Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"weather in Lisbon", "send an email"}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.EmbeddingRequests()
	if len(reqs) != 1 || reqs[0].Model != "text-embedding-3-small" || *reqs[0].Dimensions != 8 || !slices.Equal(reqs[0].Input, texts) {
		t.Fatalf("requests: %+v", reqs)
	}
	for i, text := range texts {
		want := openaitest.Vector(text, 8)
		for j := range want {
			if float32(want[j]) != vecs[i][j] {
				t.Fatalf("vector %d is not the one for %q", i, text)
			}
		}
	}
}

func TestEmbedReportsWrongLengthAndRejectedKey(t *testing.T) {
	srv := openaitest.New(t)
	srv.APIKeys = []string{"sk-test"}
	srv.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, 4, nil)
	}
	e, _ := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "m", Dimensions: 8, Timeout: 5 * time.Second})
	if _, err := e.Embed(context.Background(), []string{"q"}); err == nil || !strings.Contains(err.Error(), "has 4 dimensions, want 8") {
		t.Fatalf("wrong length: %v", err)
	}
	bad, _ := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-wrong", Model: "m"})
	if _, err := bad.Embed(context.Background(), []string{"q"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("rejected key: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("a config without a model is accepted")
	}
}
