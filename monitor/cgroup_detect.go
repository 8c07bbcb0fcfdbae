// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultCgroupRoot is where the cgroup file systems are mounted on Linux.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// DetectCgroup finds the cgroup this process runs in, from selfCgroup (the
// contents' path, normally /proc/self/cgroup, lines
// "hierarchy-id:controllers:path") and the hierarchy mounted at root
// (normally /sys/fs/cgroup):
//
//   - v2 (the unified hierarchy) when root/cgroup.controllers exists: the
//     group is root joined with the path of the "0::" line;
//   - v1 otherwise: the cpu controller's group is root/<controllers>
//     joined with the path of the line whose controllers include cpu
//     (and likewise cpuacct and cpuset), where <controllers> is the
//     line's list as the mount directory names it ("cpu,cpuacct").
//
// A container without its own cgroup namespace sees the host's path in
// /proc/self/cgroup (/kubepods/…/<id>) but has only its own group mounted
// at root; when the joined directory does not exist, the hierarchy's
// mount directory itself is the group. It returns an error naming the
// file when no cgroup with the cpu controller can be found.
func DetectCgroup(root, selfCgroup string) (CgroupPaths, error) {
	data, err := os.ReadFile(selfCgroup)
	if err != nil {
		return CgroupPaths{}, fmt.Errorf("monitor: cgroup: %w", err)
	}
	type entry struct{ controllers, path string }
	var v1 []entry
	var v2 *entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		parts := strings.SplitN(text, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return CgroupPaths{}, fmt.Errorf("monitor: cgroup: %s:%d: %q is not \"id:controllers:/path\"", selfCgroup, line, text)
		}
		e := entry{controllers: parts[1], path: parts[2]}
		if parts[0] == "0" && parts[1] == "" {
			v2 = &e
			continue
		}
		v1 = append(v1, e)
	}
	if err := sc.Err(); err != nil {
		return CgroupPaths{}, fmt.Errorf("monitor: cgroup: read %s: %w", selfCgroup, err)
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		if v2 == nil {
			return CgroupPaths{}, fmt.Errorf("monitor: cgroup: %s is a cgroup v2 mount but %s has no \"0::/path\" line", root, selfCgroup)
		}
		return CgroupPaths{Version: 2, Dir: groupDir(root, v2.path)}, nil
	}
	find := func(controller string) string {
		for _, e := range v1 {
			if slices.Contains(strings.Split(e.controllers, ","), controller) {
				return groupDir(filepath.Join(root, e.controllers), e.path)
			}
		}
		return ""
	}
	p := CgroupPaths{Version: 1, Dir: find("cpu"), CPUAcct: find("cpuacct"), CPUSet: find("cpuset")}
	if p.Dir == "" || p.CPUAcct == "" {
		return CgroupPaths{}, fmt.Errorf("monitor: cgroup: neither a cgroup v2 mount at %s (no cgroup.controllers) nor cgroup v1 cpu and cpuacct controllers in %s", root, selfCgroup)
	}
	if _, err := os.Stat(p.Dir); err != nil {
		return CgroupPaths{}, fmt.Errorf("monitor: cgroup: the v1 cpu hierarchy is not mounted: %w", err)
	}
	return p, nil
}

// groupDir joins mount and the group's path, or returns mount when the
// joined directory does not exist (a container that sees the host's path
// but has its own group mounted).
func groupDir(mount, path string) string {
	dir := filepath.Join(mount, path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return mount
	}
	return dir
}
