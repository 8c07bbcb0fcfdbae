// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
	"github.com/sluicehq/sluice/lab/peers/topfull"
)

// HotelPeerNames are the research peers a hotel service can run.
var HotelPeerNames = []string{"breakwater", "dagor", "rajomon", "topfull"}

// NewHotelPeer returns the named research peer (package lab/peers)
// built from its configuration, a *breakwater.Config, *dagor.Config,
// *rajomon.Config or *topfull.Config, validated.
func NewHotelPeer(name string, cfg any) (peers.Peer, error) {
	switch c := cfg.(type) {
	case *breakwater.Config:
		if name == "breakwater" {
			return &breakwater.Peer{Config: *c}, c.Validate()
		}
	case *dagor.Config:
		if name == "dagor" {
			return &dagor.Peer{Config: *c}, c.Validate()
		}
	case *rajomon.Config:
		if name == "rajomon" {
			return &rajomon.Peer{Config: *c}, c.Validate()
		}
	case *topfull.Config:
		if name == "topfull" {
			return &topfull.Peer{Config: *c}, c.Validate()
		}
	}
	return nil, fmt.Errorf("peer %q with a configuration of type %T: want one of %v with its own configuration", name, cfg, HotelPeerNames)
}

// DecodeHotelPeer reads the named peer's configuration from the YAML
// data of file (the peer's Config, its yaml field names; unknown keys
// are errors) and returns the peer.
func DecodeHotelPeer(name, file string, data []byte) (peers.Peer, error) {
	var cfg any
	switch name {
	case "breakwater":
		cfg = &breakwater.Config{}
	case "dagor":
		cfg = &dagor.Config{}
	case "rajomon":
		cfg = &rajomon.Config{}
	case "topfull":
		cfg = &topfull.Config{}
	default:
		return nil, fmt.Errorf("unknown peer %q (known: %v)", name, HotelPeerNames)
	}
	root, err := strictyaml.DecodeFile(file, data, cfg, "want the peer's configuration ("+name+")")
	if err != nil {
		return nil, err
	}
	p, err := NewHotelPeer(name, cfg)
	if err != nil {
		return nil, strictyaml.Locate(file, root, err)
	}
	return p, nil
}
