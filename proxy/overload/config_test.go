// SPDX-License-Identifier: Apache-2.0

package overload_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testconf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/proxy/overload"
)

// TestOverloadConfigErrors: resource rules, sensors and the policer are
// validated with file:line: path errors; a sensor that cannot work here
// fails validation naming the sensor and why.
func TestOverloadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	emptyPidfile := filepath.Join(dir, "empty.pid")
	if err := os.WriteFile(emptyPidfile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	head := testconf.Base("http://127.0.0.1:1", `stages:
  - name: cgi
    match: {path_prefix: /cgi-bin/}
    controller: voigt-cpu
  - name: big
    match: {path_prefix: /islarge/}
    controller: voigt-queue
    params: {q_ref: 35}
  - name: pi
    match: {path_prefix: /pi/}
    controller: kihl
    params: {k: 30}
  - name: plain
    match: {path_prefix: /plain/}
`)
	// head has 21 lines: the next key is on line 22.
	for _, tc := range []struct{ name, cfg, want string }{
		{"cgroup missing", "utilization: {source: cgroup, cgroup: " + dir + "/nope}\n",
			"p.yaml:22: utilization.cgroup: the cgroup CPU sensor is unavailable"},
		{"cgroup_cpus NaN", "utilization: {source: auto, cgroup_cpus: .nan}\n", "p.yaml:22: utilization.cgroup_cpus: NaN is invalid"},
		{"host cpu list not present", "utilization: {source: host, cpus: \"60000\"}\n", "p.yaml:22: utilization.cpus: the host CPU sensor is unavailable"},
		{"bad cpu list", "utilization: {source: host, cpus: \"3-1\"}\n", "p.yaml:22: utilization.cpus"},
		{"no such process", "utilization: {source: process, pid: 999999999}\n", "p.yaml:22: utilization.pid: the process CPU sensor is unavailable"},
		{"pidfile missing", "utilization: {source: process, pidfile: " + dir + "/x.pid}\n", "p.yaml:22: utilization.pidfile: the process CPU sensor is unavailable"},
		{"pidfile empty", "utilization: {source: process, pidfile: " + emptyPidfile + "}\n", "utilization.pidfile: the process CPU sensor is unavailable"},
		{"pid and pidfile", "utilization: {source: process, pid: 1, pidfile: /run/x.pid}\n", "utilization.pid: source: process needs exactly one"},
		{"unknown source", "utilization: {source: gpu}\n", "p.yaml:22: utilization.source: \"gpu\" is invalid"},
		{"field of another source", "utilization: {source: host, header: X-U}\n", "utilization.header: is only used with source: backend-header"},
		{"unknown stage", "resources:\n  - {stage: nope, resource: cpu, sensor: {source: pool-busy}}\n",
			"p.yaml:23: resources[0].stage: \"nope\" is not a configured stage"},
		{"cpu rule on a queue stage", "resources:\n  - {stage: big, resource: cpu, sensor: {source: pool-busy}}\n",
			"resources[0].resource: a cpu rule needs stage \"big\" to use controller kihl or voigt-cpu, not voigt-queue"},
		{"cpu rule without sensor", "resources:\n  - {stage: cgi, resource: cpu}\n", "resources[0].sensor: a cpu rule needs a utilization sensor"},
		{"cpu rule with a queue sensor", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: outqueue}}\n",
			"resources[0].sensor.source: \"outqueue\" is invalid for a cpu rule"},
		{"bandwidth rule on a cpu stage", "resources:\n  - {stage: cgi, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000}}\n",
			"needs stage \"cgi\" to use controller voigt-queue"},
		{"bandwidth rule without sensor", "resources:\n  - {stage: big, resource: bandwidth}\n", "resources[0].sensor: a bandwidth rule needs a sensor"},
		{"outqueue without capacity", "resources:\n  - stage: big\n    resource: bandwidth\n    sensor: {source: outqueue}\n",
			"p.yaml:25: resources[0].sensor.capacity_bytes: 0 is invalid"},
		{"outqueue sampled too rarely", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000, samples_per_period: 5}}\n",
			"resources[0].sensor.samples_per_period: 5 is invalid: must be >= 10"},
		{"outqueue bad mode", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000, mode: all}}\n",
			"resources[0].sensor.mode"},
		{"bandwidth without link", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: bandwidth}}\n",
			"resources[0].sensor.link_capacity: 0 is invalid"},
		{"link capacity in bits", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: bandwidth, link_capacity: 100Mb}}\n",
			"resources[0].sensor.link_capacity"},
		{"duplicate rule", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}\n",
			"p.yaml:24: resources[1].stage: \"cgi\" is already bound by resources[0]"},
		{"kihl auto with k", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: auto}}\n",
			"resources[0].kihl.tuning: auto picks K and Ti: remove params.k from stage \"pi\""},
		{"kihl tuning on voigt-cpu", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: auto}}\n",
			"resources[0].kihl: is only for a stage with controller kihl"},
		{"kihl bad tuning", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: magic}}\n",
			"resources[0].kihl.tuning: \"magic\" is invalid"},
		{"kihl params with a1", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {a1: -1}}\n",
			"only used with tuning: auto"},
		{"policer bad burst", "policer: {burst: -1}\n", "p.yaml:22: policer.burst: -1 is invalid"},
		{"policer bad controller", "policer: {controller: pid}\n", "policer.controller: \"pid\" is invalid"},
		{"policer bad kernel", "policer: {kernel: yes}\n", "policer.kernel: \"yes\" is invalid: must be auto, on or off"},
		{"policer inf rate with control", "policer: {rate: .inf}\n", "policer.rate: +Inf needs controller: none"},
		{"policer rate out of bounds", "policer: {rate: 5, control: {min_rate: 10}}\n", "policer.rate: 5 is invalid: must be within [min_rate, max_rate]"},
		{"policer bad q_ref", "policer: {control: {q_ref: -3}}\n", "policer.control.q_ref: -3 is invalid"},
		{"policer bad source prefix", "policer:\n  sources: {rules: [{prefix: 10.0.0.1/8, rate: 1, burst: 1}]}\n", "policer.sources.rules[0].prefix"},
		{"policer unknown key", "policer: {rates: 1}\n", "p.yaml:22: policer.rates: unknown field"},
	} {
		_, err := proxy.Parse("p.yaml", []byte(head+tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %q", tc.name, err, tc.want)
		}
	}
}

// TestOverloadConfigDefaults: the defaults of a policer and of kihl auto
// tuning, and a config that binds every kind of rule validates and builds.
func TestOverloadConfigDefaults(t *testing.T) {
	cfg, err := proxy.Parse("p.yaml", []byte(testconf.Base("http://127.0.0.1:1", `utilization: {source: pool-busy}
stages:
  - name: pi
    controller: kihl
    params: {rho_ref: 0.7}
  - name: big
    controller: voigt-queue
    params: {q_ref: 35}
resources:
  - {stage: pi, resource: cpu, kihl: {tuning: auto}}
  - {stage: big, resource: bandwidth, sensor: {source: bandwidth, link_capacity: 12.5MB}}
policer: {}
`)))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policer
	if p.Rate != 1000 || p.Burst != 20 || p.Controller != "voigt-queue" || p.Control.QRef != 100 || p.Control.Kp != 1.0/16 ||
		p.Control.Kd != 0.25 || p.Control.MinRate != 10 || p.Control.UtilRef != 70 || p.Control.Period != time.Second {
		t.Errorf("policer defaults: %+v control %+v (util_ref must default to the kihl rule's 100·rho_ref = 70)", p, p.Control)
	}
	k := cfg.Resources[0].Kihl
	if *k.A1 != overload.DefaultKihlA1 || *k.A2 != overload.DefaultKihlA2 || k.EstimatePeriods != 5 || k.MinUtilization != 0.2 {
		t.Errorf("kihl defaults: %+v", k)
	}
	if s := cfg.Resources[1].Sensor; s.Scale != 100 || float64(s.LinkCapacity) != 12.5e6 {
		t.Errorf("bandwidth sensor: %+v", s)
	}
	if err := proxy.Check(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestCgroupSourceOfThisProcess: source cgroup without a directory reads
// the group this process runs in (v2 or v1, found from /proc/self/cgroup),
// with cgroup_cpus as its capacity; auto reads it only when it is
// CPU-limited, else the host's /proc/stat.
func TestCgroupSourceOfThisProcess(t *testing.T) {
	p, err := monitor.DetectCgroup(monitor.DefaultCgroupRoot, "/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroup here: %v", err)
	}
	now := time.Now()
	src, err := overload.NewCgroupSource(&overload.UtilizationConfig{Source: overload.UtilizationCgroup, CgroupCPUs: 1.5}, now)
	if err != nil {
		t.Fatal(err)
	}
	cg, ok := src.(*monitor.Cgroup)
	if !ok || cg.Paths() != p {
		t.Fatalf("source cgroup = %#v, want the group at %+v", src, p)
	}
	if c, err := cg.Capacity(); err != nil || c != 1.5 {
		t.Errorf("cgroup_cpus 1.5: Capacity() = %v, %v", c, err)
	}
	limited, err := cg.Limited()
	if err != nil {
		t.Fatal(err)
	}
	auto, err := overload.NewCgroupSource(&overload.UtilizationConfig{Source: overload.UtilizationAuto}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, isCgroup := auto.(*monitor.Cgroup)
	if isCgroup != limited {
		t.Errorf("auto chose %q; this process's group (%v) is limited: %v", auto.Describe(), p, limited)
	}
	if !limited && !strings.Contains(auto.Describe(), "/proc/stat") {
		t.Errorf("auto on an unlimited group: %q, want the host's /proc/stat", auto.Describe())
	}
	t.Logf("cgroup: %s; auto: %s", cg.Describe(), auto.Describe())
}
