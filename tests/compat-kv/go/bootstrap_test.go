package compatkv

import (
	"fmt"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// Bootstrap: connect, open a bucket, reach its default collection, wait until ready, ping.

func TestBootstrapConnectOpenBucketAndWaitUntilReady(t *testing.T) {
	c := res(srv.connect(admin, kvTimeout)).must(t)
	defer c.Close(nil)
	bucket := c.Bucket("default")
	noError(t, waitUntilReady(bucket))
	if bucket.Name() != "default" {
		t.Fatalf("bucket name %q", bucket.Name())
	}
	coll := bucket.DefaultCollection()
	if coll.Name() != "_default" {
		t.Fatalf("collection name %q", coll.Name())
	}
	res(coll.Upsert("go::bootstrap", map[string]bool{"ready": true}, nil)).must(t)
	jsonEqual(t, getContent[map[string]any](t, coll, "go::bootstrap"), map[string]bool{"ready": true})
}

func TestBootstrapBucketPingReportsTheKVEndpointOK(t *testing.T) {
	report := res(cluster.Bucket("default").Ping(&gocb.PingOptions{
		ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue},
	})).must(t)
	endpoints := report.Services[gocb.ServiceTypeKeyValue]
	if len(endpoints) == 0 {
		t.Fatalf("no KV endpoint in %+v", report)
	}
	for _, endpoint := range endpoints {
		if endpoint.State != gocb.PingStateOk {
			t.Fatalf("endpoint %+v", endpoint)
		}
	}
}

func TestBootstrapBucketWith8VbucketsServesEveryKey(t *testing.T) {
	// 200 keys cover all 8 vbuckets of `small` many times over; a wrong vbucket map would send
	// some of them to a vbucket the server does not own.
	bucket := cluster.Bucket("small")
	noError(t, waitUntilReady(bucket))
	coll := bucket.DefaultCollection()
	for n := 0; n < 200; n++ {
		res(coll.Upsert(fmt.Sprintf("go::small::%d", n), map[string]int{"n": n}, nil)).must(t)
	}
	for n := 0; n < 200; n++ {
		jsonEqual(t, getContent[map[string]any](t, coll, fmt.Sprintf("go::small::%d", n)), map[string]int{"n": n})
	}
}
