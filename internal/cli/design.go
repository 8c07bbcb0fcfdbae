// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/control/design"
)

// newDesignCmd builds `sluice design` and its subcommands.
func newDesignCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "design",
		Short: "Compute controller gains from a paper's design rules and check stability",
		Long: `design computes controller parameters from the papers' design rules and
checks the stability of the result.

  kihl    PI control of server utilization (Andersson, Kihl, Robertsson,
          Wittenmark): pole placement, closed-loop poles, Jury triangle and
          Tsypkin criterion, stable region.
  yaksha  self-tuning PI on mean response time (Kamra, Misra, Nahum):
          Kg, Kp, Ki and the discrete gains A, B.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("design: name a design: kihl or yaksha (see 'sluice design --help')")
			}
			return usagef("design: unknown design %q (want kihl or yaksha)", args[0])
		},
	}
	cmd.AddCommand(newDesignKihlCmd(), newDesignYakshaCmd())
	return cmd
}

// kihlFlags holds the flags of `sluice design kihl`.
type kihlFlags struct {
	sigma       float64
	serviceTime time.Duration
	h           time.Duration
	a1, a2      float64
	K, Ti       float64
	region      bool
	json        bool
}

func newDesignKihlCmd() *cobra.Command {
	var f kihlFlags
	cmd := &cobra.Command{
		Use:   "kihl",
		Short: "PI control of server utilization: pole placement and stability analysis",
		Long: `kihl designs or checks the PI admission controller of Andersson, Kihl,
Robertsson and Wittenmark, "Admission Control of the Apache Web Server".

The plant serves at most σ requests per control period h (σ = μ·h). Give σ
with --sigma, or the mean service time 1/μ with --service-time (then
σ = h / service-time). Then choose one mode:

  --a1 A1 --a2 A2   pole placement for the characteristic polynomial
                    z·(z² + a1·z + a2): K = (2 + a1)·σ,
                    Ti = h·(2 + a1)/(1 + a1 + a2); then analyse K, Ti.
  --K K --Ti TI     analyse the PI gain K (requests per period per unit of
                    utilization) and integral time Ti (seconds): closed-loop
                    poles, Jury triangle a2 < 1, a2 > -1 + a1, a2 > -1 - a1
                    with a1 = K/σ - 2, a2 = 1 - K/σ + K·h/(σ·Ti), and the
                    Tsypkin criterion for the queue nonlinearity.
  --region          map the linear and Tsypkin stable regions over
                    K/σ in (0, 4) and h/Ti in (0, 1) (the paper's Fig. 5/6).

With --json the result is one JSON object (keys sigma, h_s, K, Ti, a1, a2,
poles, stable_linear, stable_tsypkin, eta, verdict), or for --region an
array of points (k_sigma, h_ti, K, Ti, stable_linear, stable_tsypkin).`,
		Example: `  sluice design kihl --sigma 44.4 --h 1s --a1 -1.55 --a2 0.71
  sluice design kihl --sigma 44.4 --h 1s --K 20 --Ti 2.8
  sluice design kihl --service-time 22.5ms --K 20 --Ti 0.1 --json
  sluice design kihl --sigma 44.4 --region`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDesignKihl(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.Float64Var(&f.sigma, "sigma", 0, "σ, maximum departures per control period (requests per period, σ = μ·h)")
	fl.DurationVar(&f.serviceTime, "service-time", 0, "mean service time 1/μ, an alternative to --sigma: σ = h / service-time (e.g. 22.5ms)")
	fl.DurationVar(&f.h, "h", time.Second, "control period h")
	fl.Float64Var(&f.a1, "a1", 0, "pole placement: coefficient a1 of z·(z² + a1·z + a2) (with --a2)")
	fl.Float64Var(&f.a2, "a2", 0, "pole placement: coefficient a2 of z·(z² + a1·z + a2) (with --a1)")
	fl.Float64Var(&f.K, "K", 0, "analysis: PI gain K, requests per period per unit of utilization (with --Ti)")
	fl.Float64Var(&f.Ti, "Ti", 0, "analysis: PI integral time Ti in seconds (with --K)")
	fl.BoolVar(&f.region, "region", false, "map the linear and Tsypkin stable regions over (K/σ, h/Ti)")
	fl.BoolVar(&f.json, "json", false, "print JSON instead of text")
	return cmd
}

// runDesignKihl validates the flag combination and runs the chosen mode.
func runDesignKihl(cmd *cobra.Command, f *kihlFlags) error {
	changed := cmd.Flags().Changed
	if f.h <= 0 {
		return usagef("design kihl: --h must be a positive duration, got %v", f.h)
	}
	placement := changed("a1") || changed("a2")
	analysis := changed("K") || changed("Ti")
	switch {
	case f.region && (placement || analysis):
		return usagef("design kihl: --region cannot be combined with --a1/--a2 or --K/--Ti")
	case placement && analysis:
		return usagef("design kihl: --a1/--a2 (pole placement) and --K/--Ti (analysis) are alternatives; give one pair")
	case changed("a1") != changed("a2"):
		return usagef("design kihl: %s", pairMissing(changed, "a1", "a2"))
	case changed("K") != changed("Ti"):
		return usagef("design kihl: %s", pairMissing(changed, "K", "Ti"))
	case !f.region && !placement && !analysis:
		return usagef("design kihl: give --a1 and --a2 (pole placement), --K and --Ti (analysis), or --region")
	}

	sigma := f.sigma
	switch {
	case changed("sigma") && changed("service-time"):
		return usagef("design kihl: --sigma and --service-time are alternatives; give one")
	case changed("service-time"):
		if f.serviceTime <= 0 {
			return usagef("design kihl: --service-time must be a positive duration, got %v", f.serviceTime)
		}
		sigma = f.h.Seconds() / f.serviceTime.Seconds()
	case !changed("sigma"):
		return usagef("design kihl: give --sigma (departures per period) or --service-time")
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return usagef("design kihl: --sigma must be a positive finite number, got %v", sigma)
	}

	out := cmd.OutOrStdout()
	if f.region {
		pts, err := design.KihlRegion(sigma, f.h, design.DefaultKihlGrid())
		if err != nil {
			return usageError{err}
		}
		if f.json {
			return writeJSON(out, pts)
		}
		return writeKihlRegion(out, sigma, f.h, design.DefaultKihlGrid(), pts)
	}

	K, Ti := f.K, f.Ti
	if placement {
		var err error
		if K, Ti, err = design.KihlPlace(sigma, f.h, f.a1, f.a2); err != nil {
			return usageError{err}
		}
	}
	a, err := design.KihlAnalyze(sigma, f.h, K, Ti)
	if err != nil {
		return usageError{err}
	}
	if f.json {
		return writeJSON(out, a)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Andersson–Kihl PI design: σ = %s requests per period, h = %v\n", num(sigma), f.h)
	if placement {
		fmt.Fprintf(&b, "pole placement for z·(z² + a1·z + a2), a1 = %s, a2 = %s:\n", num(f.a1), num(f.a2))
		line(&b, "K  = (2 + a1)·σ", num(K))
		line(&b, "Ti = h·(2 + a1)/(1 + a1 + a2)", num(Ti)+" s")
	}
	writeKihlAnalysis(&b, a)
	_, err = io.WriteString(out, b.String())
	return err
}

// pairMissing names the missing half of a flag pair.
func pairMissing(changed func(string) bool, x, y string) string {
	if changed(x) {
		return fmt.Sprintf("--%s needs --%s", x, y)
	}
	return fmt.Sprintf("--%s needs --%s", y, x)
}

// writeKihlAnalysis prints the analysis as text.
func writeKihlAnalysis(b *strings.Builder, a design.KihlAnalysis) {
	fmt.Fprintf(b, "analysis of K = %s, Ti = %s s:\n", num(a.K), num(a.Ti))
	line(b, "a1 = K/σ − 2", num(a.A1))
	line(b, "a2 = 1 − K/σ + K·h/(σ·Ti)", num(a.A2))
	poles := make([]string, len(a.Poles))
	for i, p := range a.Poles {
		poles[i] = fmt.Sprintf("%s (|z| = %s)", complexNum(p), num(p.Abs))
	}
	fmt.Fprintf(b, "  closed-loop poles: %s\n", strings.Join(poles, ", "))
	fmt.Fprintf(b, "  stable_linear:  %v (Jury triangle a2 < 1, a2 > −1 + a1, a2 > −1 − a1)\n", a.StableLinear)
	tsy := fmt.Sprintf("%v", a.StableTsypkin)
	if a.Eta != nil {
		tsy += fmt.Sprintf(" (η = %s, margin %s)", num(*a.Eta), num(a.TsypkinMargin))
	}
	gp := make([]string, len(a.GPoles))
	for i, p := range a.GPoles {
		gp[i] = fmt.Sprintf("|z| = %s", num(p.Abs))
	}
	fmt.Fprintf(b, "  stable_tsypkin: %s; poles of G: %s\n", tsy, strings.Join(gp, ", "))
	fmt.Fprintf(b, "verdict: %s\n", a.Verdict)
}

// writeKihlRegion prints the stable regions as a character map: h/Ti grows
// upwards, K/σ to the right.
func writeKihlRegion(w io.Writer, sigma float64, h time.Duration, g design.KihlGrid, pts []design.KihlRegionPoint) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Andersson–Kihl stable regions (σ = %s requests per period, h = %v); K = (K/σ)·σ, Ti = h/(h/Ti)\n", num(sigma), h)
	b.WriteString("  # linear and Tsypkin   + linear only   ! Tsypkin only   . unstable\n")
	for i := g.NTi - 1; i >= 0; i-- {
		row := pts[i*g.NK : (i+1)*g.NK]
		fmt.Fprintf(&b, "h/Ti %5.3f  ", row[0].HTi)
		for _, p := range row {
			c := byte('.')
			switch {
			case p.StableLinear && p.StableTsypkin:
				c = '#'
			case p.StableLinear:
				c = '+'
			case p.StableTsypkin:
				c = '!'
			}
			b.WriteByte(c)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "            K/σ from %s (left) to %s (right) in %d steps\n", num(g.KSigmaMin), num(g.KSigmaMax), g.NK)
	_, err := io.WriteString(w, b.String())
	return err
}

// yakshaFlags holds the flags of `sluice design yaksha`.
type yakshaFlags struct {
	tref    time.Duration
	lambda0 float64
	h       time.Duration
	json    bool
}

// yakshaOutput is the JSON form of `sluice design yaksha --json`.
type yakshaOutput struct {
	TrefSeconds float64 `json:"tref_s"`
	Lambda0     float64 `json:"lambda0"`
	HSeconds    float64 `json:"h_s"`
	design.YakshaGains
}

func newDesignYakshaCmd() *cobra.Command {
	var f yakshaFlags
	cmd := &cobra.Command{
		Use:   "yaksha",
		Short: "Self-tuning PI on mean response time: gains Kg, Kp, Ki, A, B",
		Long: `yaksha computes the PI gains of Kamra, Misra and Nahum, "Yaksha: A
Self-Tuning Controller for Managing the Performance of 3-Tiered Web sites".

The plant gain is Kg = λ0·Tref² (seconds); with the closed-loop pole at
s = -0.1 and a 45° phase margin, Kp = 1/(√2·Kg) and Ki = 0.1·(Kp + 1/Kg);
the Tustin discretisation at period h gives A = Kp + Ki·h/2 and
B = Kp − Ki·h/2 for the law pd(k) = pd(k−1) + A·e(k) − B·e(k−1).

With --json the result is one JSON object with keys tref_s, lambda0, h_s,
kg, kp, ki, a, b.`,
		Example: `  sluice design yaksha --tref 150ms --lambda0 50 --h 1s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDesignYaksha(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.tref, "tref", 0, "response-time target Tref (required), e.g. 150ms")
	fl.Float64Var(&f.lambda0, "lambda0", 0, "nominal arrival rate λ0 in requests per second (required)")
	fl.DurationVar(&f.h, "h", time.Second, "control period h")
	fl.BoolVar(&f.json, "json", false, "print JSON instead of text")
	return cmd
}

func runDesignYaksha(cmd *cobra.Command, f *yakshaFlags) error {
	changed := cmd.Flags().Changed
	for _, name := range []string{"tref", "lambda0"} {
		if !changed(name) {
			return usagef("design yaksha: --%s is required", name)
		}
	}
	if f.tref <= 0 {
		return usagef("design yaksha: --tref must be a positive duration, got %v", f.tref)
	}
	if !(f.lambda0 > 0) || math.IsInf(f.lambda0, 0) {
		return usagef("design yaksha: --lambda0 must be a positive finite rate in requests per second, got %v", f.lambda0)
	}
	if f.h <= 0 {
		return usagef("design yaksha: --h must be a positive duration, got %v", f.h)
	}
	g, err := design.Yaksha(f.tref, f.lambda0, f.h)
	if err != nil {
		return usageError{err}
	}
	out := cmd.OutOrStdout()
	if f.json {
		return writeJSON(out, yakshaOutput{f.tref.Seconds(), f.lambda0, f.h.Seconds(), g})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Yaksha PI design: Tref = %v, λ0 = %s req/s, h = %v, closed-loop pole s = %s 1/s\n",
		f.tref, num(f.lambda0), f.h, num(design.DefaultYakshaPole))
	line(&b, "kg = λ0·Tref²", num(g.Kg)+" s")
	line(&b, "kp = 1/(√2·kg)", num(g.Kp)+" 1/s")
	line(&b, "ki = −pole·(kp + 1/kg)", num(g.Ki)+" 1/s²")
	line(&b, "a  = kp + ki·h/2", num(g.A)+" 1/s")
	line(&b, "b  = kp − ki·h/2", num(g.B)+" 1/s")
	_, err = io.WriteString(out, b.String())
	return err
}

// writeJSON prints v as indented JSON; encoding failures (a non-finite
// number) are runtime errors.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("design: writing JSON: %w", err)
	}
	return nil
}

// line prints an indented "label = value" line, values aligned.
func line(b *strings.Builder, label, value string) {
	fmt.Fprintf(b, "  %-30s= %s\n", label, value)
}

// num prints x with up to 6 significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// complexNum prints a pole as a complex number.
func complexNum(p design.Pole) string {
	if p.Im == 0 {
		return num(p.Re)
	}
	sign := "+"
	if p.Im < 0 {
		sign = "−"
	}
	return fmt.Sprintf("%s%s%si", num(p.Re), sign, num(math.Abs(p.Im)))
}
