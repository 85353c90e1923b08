package compatkv

// couchbases:// with the official SDK: bootstrap over KV TLS trusting the test CA (TestMain
// makes it and starts settee with it), the same documents as the plain door, and an SDK that
// does not trust the certificate refused.

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

func connectTLS(t *testing.T, caFile string) *gocb.Cluster {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(srv.certs, caFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	tlsCluster, err := gocb.Connect(srv.tlsConnectionString, gocb.ClusterOptions{
		Authenticator:  admin,
		SecurityConfig: gocb.SecurityConfig{TLSRootCAs: roots},
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: connectTimeout, KVTimeout: kvTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tlsCluster
}

func TestCouchbasesReadsAndWritesTheSameDocuments(t *testing.T) {
	tlsCluster := connectTLS(t, "ca.crt")
	defer tlsCluster.Close(nil)
	bucket := tlsCluster.Bucket("default")
	if err := waitUntilReady(bucket); err != nil {
		t.Fatal(err)
	}
	secure := bucket.DefaultCollection()
	key := uniqueKey(t)
	if _, err := secure.Upsert(key, map[string]string{"over": "tls"}, nil); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	result, err := collection.Get(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := result.Content(&got); err != nil || got["over"] != "tls" {
		t.Fatalf("plain door read %v (%v)", got, err)
	}
	if _, err := collection.Upsert(key, map[string]string{"over": "plain"}, nil); err != nil {
		t.Fatal(err)
	}
	result, err = secure.Get(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := result.Content(&got); err != nil || got["over"] != "plain" {
		t.Fatalf("TLS door read %v (%v)", got, err)
	}
}

func TestAnSDKThatDoesNotTrustTheCertificateIsRefused(t *testing.T) {
	tlsCluster := connectTLS(t, "other-ca.crt")
	defer tlsCluster.Close(nil)
	_, err := tlsCluster.Bucket("default").DefaultCollection().Get("anything",
		&gocb.GetOptions{Timeout: 3 * time.Second})
	if err == nil {
		t.Fatal("a get succeeded over a connection to an untrusted certificate")
	}
}
