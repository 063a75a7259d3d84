// Reading what the API server stored, straight from the embedded etcd.

package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// EtcdURL is the embedded etcd's client URL (plain HTTP on loopback), for tests that read
// what the API server stored.
func (c *Cluster) EtcdURL() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "etcd-client.port"))
	if err != nil {
		return "", err
	}
	return "http://127.0.0.1:" + strings.TrimSpace(string(b)), nil
}

// EtcdGet returns the bytes the API server stored at key (such as
// /registry/ai.example.com/inferenceservices/ns/name), nil when absent, through etcd's JSON
// gateway so the tests need no etcd client.
func (c *Cluster) EtcdGet(ctx context.Context, key string) ([]byte, error) {
	base, err := c.EtcdURL()
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		KVs []struct {
			Value []byte `json:"value"` // base64 in JSON, decoded by encoding/json
		} `json:"kvs"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("etcd range %s: %s: %s", key, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if len(out.KVs) == 0 {
		return nil, nil
	}
	return out.KVs[0].Value, nil
}
