package client

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A reload while calls are being made is race-free: a call reads the
// configuration it began with, never its destination's as a reload
// replaces it (under -race this failed: Transport.RoundTrip read the
// destination's configuration without its lock).
func TestSetConfigDuringCalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	tr, err := New(http.DefaultTransport, DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100 {
			cfg := DefaultConfig()
			cfg.Throttle.Window = time.Duration(1+i%2) * time.Second
			if err := tr.SetConfig(cfg); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 25 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				res, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
			}
		})
	}
	wg.Wait()
}
