// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/httpx"
)

// compileStageMatch checks stage s's name and match (at path p) and returns
// the rule that routes requests to it.
func compileStageMatch(p string, s *StageConfig) (classify.StageRule, error) {
	var rule classify.StageRule
	switch {
	case s.Name == "":
		return rule, fieldErr(p+".name", "must be set")
	case s.Name == ImplicitStage:
		return rule, fieldErr(p+".name", "%q is reserved for the implicit stage of requests no stage matches", s.Name)
	case !nameRE.MatchString(s.Name):
		return rule, fieldErr(p+".name", "%q is not a valid stage name (letters, digits, '_', '.', '-')", s.Name)
	}
	m := s.Match
	if m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, "/") {
		return rule, fieldErr(p+".match.path_prefix", "%q must start with '/'", m.PathPrefix)
	}
	rule.PathPrefix = m.PathPrefix
	if err := compileGRPC(p+".match", m, &rule); err != nil {
		return rule, err
	}
	if m.PathRegex != "" {
		re, err := regexp.Compile(m.PathRegex)
		if err != nil {
			return rule, fieldErr(p+".match.path_regex", "%q is not a valid regular expression: %v", m.PathRegex, err)
		}
		rule.PathRegex = re
	}
	for j, meth := range m.Methods {
		if !httpx.IsToken(meth) {
			return rule, fieldErr(fmt.Sprintf("%s.match.methods[%d]", p, j), "%q is not a valid method", meth)
		}
		if up := strings.ToUpper(meth); up != meth && isStandardMethod(up) {
			return rule, fieldErr(fmt.Sprintf("%s.match.methods[%d]", p, j), "%q: methods are case-sensitive; write %q", meth, up)
		}
		rule.Methods = append(rule.Methods, meth)
	}
	if m.Host != "" {
		h := m.Host
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			if _, err := netip.ParseAddr(h[1 : len(h)-1]); err != nil {
				return rule, fieldErr(p+".match.host", "%q is not a valid IPv6 literal", h)
			}
		} else if strings.ContainsAny(h, ":/ \t") {
			return rule, fieldErr(p+".match.host", "%q must be a host name without port or scheme", h)
		}
		rule.Host = h
	}
	return rule, nil
}

// compileClassTargets checks stage s's class_targets (at path p) against
// the classes and its controller, and hands them to a seda controller,
// with one controller per class when the stage differentiates.
func compileClassTargets(p string, s *StageConfig, ctrl control.Config, order []string, classes map[string]int, differentiate bool) error {
	n := len(order)
	sortedTargets := make([]string, 0, len(s.ClassTargets))
	for name := range s.ClassTargets {
		sortedTargets = append(sortedTargets, name)
	}
	sort.Strings(sortedTargets)
	for _, name := range sortedTargets {
		tp := p + ".class_targets." + name
		if _, ok := classes[name]; !ok {
			return fieldErr(tp, "%q is not a class of classes.order (%s)", name, strings.Join(order, ", "))
		}
		if d := s.ClassTargets[name]; d <= 0 {
			return fieldErr(tp, "%v must be a positive duration such as 500ms", d)
		}
	}
	if seda, ok := ctrl.(*control.SEDAConfig); ok {
		if seda.Degrade.Enabled && n > 1 && differentiate {
			return fieldErr(p+".params.degrade.enabled",
				"degradation needs one controller shared by all %d classes: set %s.differentiate: false", n, p)
		}
		if len(s.ClassTargets) > 0 && n > 1 && !differentiate {
			return fieldErr(p+".class_targets", "per-class targets need %s.differentiate: true (one controller per class)", p)
		}
		if n > 1 && differentiate {
			seda.Classes = n
		}
		if len(s.ClassTargets) > 0 {
			seda.ClassTargets = make([]time.Duration, seda.Classes)
			for name, d := range s.ClassTargets {
				seda.ClassTargets[classes[name]] = d
			}
		}
		if s.Window < seda.NReq {
			return fieldErr(p+".window", "%d is smaller than params.nreq (%d): the window must hold nreq samples", s.Window, seda.NReq)
		}
	} else if len(s.ClassTargets) > 0 {
		return fieldErr(p+".class_targets", "per-class targets are only for the seda controller, not %s", s.Controller)
	}
	return nil
}
