package compatkv

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// The same documents through both doors: KV (gocb) and the CouchDB HTTP API.

var revPattern = regexp.MustCompile(`^(\d+)-[0-9a-f]+$`)

func docPath(key string) string { return "/default/" + url.PathEscape(key) }

func generation(t *testing.T, rev string) int {
	t.Helper()
	match := revPattern.FindStringSubmatch(rev)
	if match == nil {
		t.Fatalf("malformed _rev %q", rev)
	}
	n, _ := strconv.Atoi(match[1])
	return n
}

func httpJSON(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	status, raw, err := srv.http(method, path, body)
	noError(t, err)
	var decoded map[string]any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatalf("%s %s answered %d with non-JSON %q", method, path, status, raw)
	}
	return status, decoded
}

// httpGet reads a document over HTTP and returns its body and its _rev.
func httpGet(t *testing.T, key string) (map[string]any, string) {
	t.Helper()
	status, body := httpJSON(t, "GET", docPath(key), nil)
	if status != 200 {
		t.Fatalf("GET %s answered %d: %v", key, status, body)
	}
	if body["_id"] != key {
		t.Fatalf("_id %v, want %s", body["_id"], key)
	}
	rev, _ := body["_rev"].(string)
	generation(t, rev)
	delete(body, "_id")
	delete(body, "_rev")
	return body, rev
}

type changeRow struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
	Changes []struct {
		Rev string `json:"rev"`
	} `json:"changes"`
}

func changesRow(t *testing.T, key string) changeRow {
	t.Helper()
	status, raw, err := srv.http("GET", "/default/_changes", nil)
	noError(t, err)
	if status != 200 {
		t.Fatalf("_changes answered %d: %s", status, raw)
	}
	var feed struct {
		Results []changeRow `json:"results"`
	}
	noError(t, json.Unmarshal(raw, &feed))
	for _, row := range feed.Results {
		if row.ID == key {
			return row
		}
	}
	t.Fatalf("%s is missing from _changes", key)
	return changeRow{}
}

func TestCrossDoorAnSdkUpsertIsReadableOverHTTPAndInChanges(t *testing.T) {
	key := uniqueKey(t)
	document := map[string]any{"name": "from the SDK", "n": 7, "nested": map[string]any{"list": []any{1, "two", nil}}, "ok": true}
	res(collection.Upsert(key, document, nil)).must(t)
	body, rev := httpGet(t, key)
	jsonEqual(t, body, document)
	row := changesRow(t, key)
	if row.Deleted || len(row.Changes) != 1 || row.Changes[0].Rev != rev {
		t.Fatalf("_changes row %+v, want rev %s", row, rev)
	}
}

func TestCrossDoorAnHTTPPutIsReadableByTheSdkWithACas(t *testing.T) {
	key := uniqueKey(t)
	document := map[string]any{"name": "from HTTP", "n": 8, "list": []int{1, 2, 3}}
	if status, reply := httpJSON(t, "PUT", docPath(key), document); status != 201 {
		t.Fatalf("PUT answered %d: %v", status, reply)
	}
	result := res(collection.Get(key, nil)).must(t)
	if result.Cas() == 0 {
		t.Fatal("zero CAS")
	}
	jsonEqual(t, contentOf[map[string]any](t, result), document)
}

func TestCrossDoorEveryMutationThroughEitherDoorChangesCasAndRev(t *testing.T) {
	key := uniqueKey(t)
	seenCas := map[gocb.Cas]bool{}
	seenRevs := map[string]bool{}
	sdkState := func() *gocb.GetResult {
		t.Helper()
		result := res(collection.Get(key, nil)).must(t)
		if seenCas[result.Cas()] {
			t.Fatal("CAS did not change")
		}
		seenCas[result.Cas()] = true
		return result
	}
	httpState := func() (map[string]any, string) {
		t.Helper()
		body, rev := httpGet(t, key)
		if seenRevs[rev] {
			t.Fatal("_rev did not change")
		}
		seenRevs[rev] = true
		return body, rev
	}

	// 1. SDK insert.
	res(collection.Insert(key, map[string]int{"step": 1}, nil)).must(t)
	cas1 := sdkState().Cas()
	_, rev1 := httpState()
	if generation(t, rev1) != 1 {
		t.Fatalf("rev %s after insert", rev1)
	}

	// 2. HTTP update.
	status, put2 := httpJSON(t, "PUT", docPath(key), map[string]any{"_rev": rev1, "step": 2})
	if status != 201 {
		t.Fatalf("PUT answered %d: %v", status, put2)
	}
	result2 := sdkState()
	jsonEqual(t, contentOf[map[string]any](t, result2), map[string]int{"step": 2})
	if _, rev := httpState(); rev != put2["rev"] || generation(t, rev) != 2 {
		t.Fatalf("rev %s, PUT answered %v", rev, put2["rev"])
	}
	// The HTTP write made the SDK's old CAS stale.
	_, err := collection.Replace(key, map[string]string{"step": "lost"}, &gocb.ReplaceOptions{Cas: cas1})
	isError(t, err, gocb.ErrCasMismatch)

	// 3. SDK replace with the current CAS.
	res(collection.Replace(key, map[string]int{"step": 3}, &gocb.ReplaceOptions{Cas: result2.Cas()})).must(t)
	sdkState()
	body3, rev3 := httpState()
	jsonEqual(t, body3, map[string]int{"step": 3})
	if generation(t, rev3) != 3 {
		t.Fatalf("rev %s after the third write", rev3)
	}
	// The SDK write made the HTTP client's old revision stale.
	if status, reply := httpJSON(t, "PUT", docPath(key), map[string]any{"_rev": put2["rev"], "step": "lost"}); status != 409 {
		t.Fatalf("PUT with a stale _rev answered %d: %v", status, reply)
	}

	// 4. SDK upsert.
	res(collection.Upsert(key, map[string]int{"step": 4}, nil)).must(t)
	sdkState()
	body4, rev4 := httpState()
	jsonEqual(t, body4, map[string]int{"step": 4})
	if generation(t, rev4) != 4 {
		t.Fatalf("rev %s after the fourth write", rev4)
	}

	// 5. HTTP update again.
	if status, reply := httpJSON(t, "PUT", docPath(key), map[string]any{"_rev": rev4, "step": 5}); status != 201 {
		t.Fatalf("PUT answered %d: %v", status, reply)
	}
	jsonEqual(t, contentOf[map[string]any](t, sdkState()), map[string]int{"step": 5})
	if _, rev := httpState(); generation(t, rev) != 5 {
		t.Fatalf("rev %s after the fifth write", rev)
	}
}

func TestCrossDoorAnSdkRemoveIsADeletionOverHTTP(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	_, rev := httpGet(t, key)
	res(collection.Remove(key, nil)).must(t)
	status, body := httpJSON(t, "GET", docPath(key), nil)
	if status != 404 || body["error"] != "not_found" {
		t.Fatalf("GET after remove answered %d: %v", status, body)
	}
	row := changesRow(t, key)
	if !row.Deleted || len(row.Changes) != 1 || row.Changes[0].Rev == rev || generation(t, row.Changes[0].Rev) != 2 {
		t.Fatalf("_changes row %+v after remove of rev %s", row, rev)
	}
}

func TestCrossDoorAnHTTPDeleteIsDocumentNotFoundForTheSdk(t *testing.T) {
	key := uniqueKey(t)
	status, created := httpJSON(t, "PUT", docPath(key), map[string]int{"v": 1})
	if status != 201 {
		t.Fatalf("PUT answered %d: %v", status, created)
	}
	cas := res(collection.Get(key, nil)).must(t).Cas()
	if status, deleted := httpJSON(t, "DELETE", docPath(key)+"?rev="+created["rev"].(string), nil); status != 200 {
		t.Fatalf("DELETE answered %d: %v", status, deleted)
	}
	_, err := collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	if exists(t, collection, key) {
		t.Fatal("exists after an HTTP DELETE")
	}
	_, err = collection.Replace(key, map[string]int{"v": 2}, &gocb.ReplaceOptions{Cas: cas})
	isError(t, err, gocb.ErrDocumentNotFound)
}
