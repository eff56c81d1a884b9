package contract

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The package documentation shows the key table as it is.
func TestDocShowsTheKeyTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), keyTableDoc()) {
		t.Fatalf("doc.go does not show the key table; it should read:\n%s", keyTableDoc())
	}
}

// Every key a Keys method names is in the table, under the name the
// method builds, and every key the table lists but the gateway's has a
// method there.
func TestKeyTableNamesEveryKey(t *testing.T) {
	k := Keys{Prefix: "P"}
	listed := map[string]bool{}
	for _, s := range KeyTable {
		listed["P:"+strings.ReplaceAll(s.Name, "<hash>", "<id>")] = true
	}
	named := map[string]bool{}
	v := reflect.ValueOf(k)
	for i := range v.NumMethod() {
		m := v.Method(i)
		mt := m.Type()
		if mt.NumOut() != 1 || mt.Out(0).Kind() != reflect.String || mt.NumIn() > 1 {
			continue
		}
		var name string
		switch {
		case mt.NumIn() == 0:
			name = m.Call(nil)[0].String()
		case mt.In(0).Kind() == reflect.Int64:
			name = m.Call([]reflect.Value{reflect.ValueOf(int64(7))})[0].String()
			name = strings.Replace(name, "v7", "v<N>", 1)
			name = strings.Replace(name, "d7", "d<day>", 1)
		case mt.In(0).Kind() == reflect.String:
			name = m.Call([]reflect.Value{reflect.ValueOf("<id>")})[0].String()
		default:
			continue
		}
		named[name] = true
		if !listed[name] {
			t.Errorf("Keys.%s names %s, which the key table does not list", v.Type().Method(i).Name, name)
		}
	}
	// The pinned copy's keys are named as the current version's are.
	for _, name := range []string{k.Pinned().Version(), k.Pinned().Head(), k.Pinned().Tools(), k.Pinned().Embeddings(), k.Pinned().Metadata()} {
		named[name] = true
	}
	for name := range listed {
		if !named[name] {
			t.Errorf("the key table lists %s, which no Keys method names", name)
		}
	}
}

// docs/redis-contract.md describes every key of the table.
func TestContractDocsNameEveryKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "redis-contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range KeyTable {
		if !strings.Contains(string(doc), "`P:"+s.Name+"`") {
			t.Errorf("docs/redis-contract.md does not describe P:%s", s.Name)
		}
	}
}

// The deletion of a catalog deletes every key of the table but those
// that expire, each retained version's and each day's of the usage
// window.
func TestDeletedKeysFollowTheTable(t *testing.T) {
	k := Keys{Prefix: "P"}
	now := time.Unix(0, 0) // day 0 of the epoch
	keys := map[string]bool{}
	for _, key := range DeletedKeys(k, 3, now) {
		keys[key] = true
	}
	for _, want := range []string{"P:version", "P:head", "P:quality", "P:requests:by", "P:changes:v3", "P:changes:v1", "P:catalog:v2", "P:usage:d0", "P:usage:by:d1", "P:usage:users:d-28"} {
		if !keys[want] {
			t.Errorf("the deletion leaves %s", want)
		}
	}
	for key := range keys {
		if strings.HasPrefix(key, "P:gateway:") {
			t.Errorf("the deletion looks for %s, which expires", key)
		}
	}
}
