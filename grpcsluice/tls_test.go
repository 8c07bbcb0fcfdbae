// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"crypto/tls"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/grpctest"
	"github.com/sluicehq/sluice/internal/testcert"
)

// The client certificate grpc-go verified reaches the policy, as the
// proxy's listener passes it: a class rule on the certificate's identity
// classifies the call (the refusal names its class), over mutual TLS on
// a loopback socket.
func TestClientCertReachesPolicy(t *testing.T) {
	ca, clients := testcert.NewCA(t, "server CA"), testcert.NewCA(t, "client CA")
	srvCert := ca.Issue(t, testcert.Leaf{CommonName: "svc", IPs: []string{"127.0.0.1"}}).TLS(t)
	api := clients.Issue(t, testcert.Leaf{CommonName: "api", URIs: []string{"spiffe://corp/ns/shop/sa/api"}, Client: true}).TLS(t)
	pol := newPolicy(t, `
classes:
  order: [mesh, default]
  rules:
    - {class: mesh, client_cert: {value: "spiffe://corp/ns/shop/sa/api"}}
stages: [{name: api, match: {path_prefix: /}, controller: static-rate, params: {rate: 0.001}, burst: 1}]`)
	lis := grpctest.Listen(t)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: clients.Pool(),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})
	t.Cleanup(grpctest.Serve(lis, &service{}, append(NewServer(pol, ServerOptions{}).ServerOptions(), grpc.Creds(creds))...).Stop)
	cc := dial(t, lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{api}, MinVersion: tls.VersionTLS13})))
	tc := testpb.NewTestServiceClient(cc)
	if _, err := tc.UnaryCall(ctxT(t), &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := tc.UnaryCall(ctxT(t), &testpb.SimpleRequest{})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "class mesh") {
		t.Errorf("second call: %v; want RESOURCE_EXHAUSTED naming class mesh (the certificate's class)", err)
	}
}
