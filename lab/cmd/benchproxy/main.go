// SPDX-License-Identifier: Apache-2.0

// Command benchproxy is the baseline of the proxy's wrk comparison: a
// plain net/http/httputil.ReverseProxy with the same upstream transport
// settings as sluice's backend pool (proxy.NewTransport with the default
// backends configuration), ReverseProxy's default flushing (FlushInterval
// 0: one write per response, as sluice's proxy does) and no admission
// control. With -trivial it is instead the trivial backend of the
// comparison (a -size byte 200 reply, 1 KiB by default). It is not
// shipped: it is part of the lab (scripts/bench-wrk.sh builds it).
//
//	cd lab
//	go run ./cmd/benchproxy -trivial 127.0.0.1:28081
//	go run ./cmd/benchproxy -listen 127.0.0.1:28090 -backend http://127.0.0.1:28081
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // -pprof serves DefaultServeMux
	"net/url"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/proxy"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:28090", "address to listen on")
	backend := flag.String("backend", "http://127.0.0.1:28081", "backend URL")
	pooled := flag.Bool("bufferpool", false, "recycle the 32 KiB copy buffers (as sluice does) instead of allocating one per response")
	trivial := flag.String("trivial", "", "serve the trivial backend on this address instead")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address (to profile the baseline next to sluice)")
	size := flag.Int("size", 1024, "trivial backend: reply body size in bytes (≥ 1)")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Println(http.ListenAndServe(*pprofAddr, nil)) }()
	}
	if *trivial != "" {
		if *size < 1 {
			log.Fatalf("-size %d: must be at least 1 byte", *size)
		}
		body := []byte(strings.Repeat("x", *size-1) + "\n")
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		})
		log.Fatal((&http.Server{Addr: *trivial, Handler: h, ReadHeaderTimeout: proxy.DefaultReadHeaderTimeout}).ListenAndServe())
	}
	rp, err := newBaseline(*backend, *pooled)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *listen, Handler: rp, ReadHeaderTimeout: proxy.DefaultReadHeaderTimeout,
		IdleTimeout: proxy.DefaultIdleTimeout}
	log.Fatal(srv.ListenAndServe())
}

// newBaseline returns the plain reverse proxy to backend, with the
// transport of sluice's default backend pool and, when pooled, recycled
// copy buffers.
func newBaseline(backend string, pooled bool) (*httputil.ReverseProxy, error) {
	u, err := url.Parse(backend)
	if err != nil {
		return nil, err
	}
	cfg := proxy.Config{Backends: proxy.BackendsConfig{Servers: []proxy.ServerConfig{{URL: backend}}}}
	cfg.SetDefaults()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: proxy.NewTransport(cfg.Backends),
	}
	if pooled {
		rp.BufferPool = &bufferPool{}
	}
	return rp, nil
}

// bufferPool recycles 32 KiB copy buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if x, ok := b.p.Get().(*[32 << 10]byte); ok {
		return x[:]
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(x []byte) {
	if len(x) == 32<<10 {
		b.p.Put((*[32 << 10]byte)(x))
	}
}
