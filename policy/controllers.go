// SPDX-License-Identifier: Apache-2.0

package policy

import "github.com/sluicehq/sluice/control"

// StageControllers returns, by stage name, the controller configuration
// New would build for each configured stage: the stage's params decoded
// strictly over its controller's defaults and validated (the implicit
// stage is not included). It works on a copy of c with its defaults
// filled in, and returns the first invalid setting as a *sluice.FieldError, as
// Validate does. Callers that bind sensors or resolve parameters at run
// time (the proxy) read periods and references from it; the returned
// configurations are fresh copies the caller may keep.
func (c *Config) StageControllers() (map[string]control.Config, error) {
	cc := c.clone()
	cc.SetDefaults()
	comp, err := compile(&cc)
	if err != nil {
		return nil, err
	}
	out := make(map[string]control.Config, len(comp.stages))
	for _, s := range comp.stages {
		out[s.cfg.Name] = s.ctrl
	}
	return out, nil
}
