// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/inproc"
	"github.com/sluicehq/sluice/proxy"
)

// testTimeout bounds every wait; it is generous (machines are noisy) and
// only reached when something hangs.
const testTimeout = 30 * time.Second

// sluice is an in-process proxy serving a configuration on real sockets.
type sluice struct {
	srv   *proxy.Server
	addr  string // the first listener, host:port
	admin string // http://host:port
}

// startSluice serves cfg in-process until the test ends.
func startSluice(t *testing.T, cfg string) *sluice {
	t.Helper()
	srv := inproc.Start(t, cfg)
	return &sluice{srv: srv, addr: srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String()}
}

// httpClient bounds every request and keeps no idle connection after a
// test (goleak).
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: testTimeout, Transport: tr}
}

func fetch(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
