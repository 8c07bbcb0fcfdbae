// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"cmp"
	"math"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/policer"
)

// PolicerConfig is the connection policer (early discard): a token bucket
// checked at accept time on every client listener, whose rate a
// voigt-queue controller sets each period from the backend pool's wait
// queue, allowed to increase only while the CPU rule's utilization is
// below its reference (docs/algorithms.md §1).
type PolicerConfig struct {
	// Config is the bucket: rate (initial, connections/s, default 1000),
	// burst (default 20) and per-source policing (sources).
	policer.Config `yaml:",inline"`
	// Controller is "voigt-queue" (default) or "none" (the rate stays at
	// rate).
	Controller string `yaml:"controller"`
	// Control are the voigt-queue controller's parameters.
	Control PolicerControlConfig `yaml:"control"`
	// Kernel is where the global rate is enforced: "auto" (the default)
	// drops excess SYNs in the kernel (nftables, package policer/nft) when
	// sluice runs on Linux with CAP_NET_ADMIN and resets them at accept
	// in user space otherwise, saying once in the log which path is in
	// force; "on" requires the kernel path (start fails without it);
	// "off" keeps the user-space reset.
	Kernel string `yaml:"kernel"`
}

// PolicerControlConfig is the policer's voigt-queue controller: the
// library's configuration (control.VoigtQueueConfig: period, q_ref, kp,
// kd, min_rate, max_rate, util_ref, each with the library's default but
// util_ref) and the decisions kept for /state. Its initial rate is
// PolicerConfig.Rate: initial_rate may only repeat it. In a file an
// absent kd is the library's 1/4 and kd: 0 turns the derivative off; a Go
// program that builds the section sets Kd itself (0: none).
type PolicerControlConfig struct {
	// VoigtQueueConfig is the controller. Its UtilRef is the CPU
	// utilization in percent at and above which the rate may not
	// increase (default: the first CPU rule's reference, util_ref of
	// voigt-cpu or 100·rho_ref of kihl, else 90).
	control.VoigtQueueConfig `yaml:",inline"`
	// History is the number of decisions kept for /state (default 100).
	History int `yaml:"history"`
}

// UnmarshalYAML decodes the policer section over the library's
// derivative gain, so that an absent kd keeps its default and kd: 0
// means none.
func (p *PolicerConfig) UnmarshalYAML(n *yaml.Node) error {
	type plain PolicerConfig
	if p.Control.Kd == 0 {
		p.Control.Kd = control.DefaultVoigtQueueConfig().Kd
	}
	return n.Decode((*plain)(p))
}

// setDefaults fills the policer's defaults; utilRef is the reference of
// the first CPU rule in percent (0 when there is none).
func (p *PolicerConfig) setDefaults(utilRef float64) {
	fillZero(&p.Config, policer.DefaultConfig())
	p.Controller = cmp.Or(p.Controller, PolicerControllerVoigtQueue)
	p.Kernel = cmp.Or(p.Kernel, PolicerKernelAuto)
	q := control.DefaultVoigtQueueConfig()
	q.Kd = 0               // kd: 0 turns the derivative off (an absent kd is set by UnmarshalYAML)
	q.InitialRate = p.Rate // the controller starts from the bucket's rate
	if utilRef > 0 {
		q.UtilRef = utilRef
	}
	fillZero(&p.Control.VoigtQueueConfig, q)
	p.Control.History = cmp.Or(p.Control.History, DefaultPolicerHistory)
}

func (p *PolicerConfig) validate() error {
	if err := p.Config.Validate(); err != nil {
		return fielderr.Under("policer", err)
	}
	switch p.Kernel {
	case PolicerKernelAuto, PolicerKernelOn, PolicerKernelOff:
	default:
		return fieldErr("policer.kernel", "%q is invalid: must be %s, %s or %s", p.Kernel, PolicerKernelAuto, PolicerKernelOn, PolicerKernelOff)
	}
	switch p.Controller {
	case PolicerControllerNone:
		return nil
	case PolicerControllerVoigtQueue:
	default:
		return fieldErr("policer.controller", "%q is invalid: must be %s or %s", p.Controller, PolicerControllerVoigtQueue, PolicerControllerNone)
	}
	if math.IsInf(p.Rate, 1) {
		return fieldErr("policer.rate", "+Inf needs controller: none (the voigt-queue controller starts from a finite rate)")
	}
	if p.Control.History < 1 {
		return fieldErr("policer.control.history", "%d is invalid: must be ≥ 1", p.Control.History)
	}
	if p.Control.InitialRate != p.Rate {
		return fieldErr("policer.control.initial_rate", "%v is invalid: the controller's initial rate is policer.rate (%v); leave it unset", p.Control.InitialRate, p.Rate)
	}
	if err := p.Control.Validate(); err != nil {
		field := control.FieldOf(err)
		msg := strings.TrimPrefix(err.Error(), field+": ")
		if field == "initial_rate" {
			return fieldErr("policer.rate", "%s (the controller's initial rate is policer.rate)", msg)
		}
		if field == "" {
			return fieldErr("policer.control", "%v", err)
		}
		return fieldErr("policer.control."+field, "%s", msg)
	}
	return nil
}
