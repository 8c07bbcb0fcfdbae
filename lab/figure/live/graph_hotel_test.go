// SPDX-License-Identifier: Apache-2.0

package live

import (
	"testing"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/testbed"
)

// sideWrap stands for observedClient: a wrapper, another object than
// the client it wraps.
type sideWrap struct{ peers.Client }

// Every client side of the end users gets a LiveClient per distinct
// client object: TopFull's entry is one object for every caller, so one
// LiveClient (its lock the only way into it) serves all 16 sides of both
// classes; Breakwater's clients are one per side.
func TestHotelPeerSides(t *testing.T) {
	g := figure.HotelGraphSmall()
	for _, tc := range []struct {
		name string
		want int
	}{{"topfull", 1}, {"breakwater", 32}} {
		cfg, err := figure.HotelPeerConfig(tc.name, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := testbed.NewHotelPeer(tc.name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		live := map[peers.Client]*peers.LiveClient{}
		started, wrapped := 0, 0
		for range figure.HotelClasses {
			ics, err := peerSides(peer, 16, "frontend", live, func(c peers.Client) peers.Client { wrapped++; return &sideWrap{c} },
				func(*peers.LiveClient) { started++ })
			if err != nil {
				t.Fatal(err)
			}
			if len(ics) != 16 {
				t.Fatalf("%s: %d interceptors, want 16", tc.name, len(ics))
			}
		}
		if started != tc.want || wrapped != tc.want || len(live) != tc.want {
			t.Errorf("%s: %d LiveClients started (%d wrapped, %d in the map), want %d", tc.name, started, wrapped, len(live), tc.want)
		}
	}
}
