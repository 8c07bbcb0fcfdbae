// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"bytes"
	"encoding/json"
	htmltemplate "html/template"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/sluicehq/sluice/internal/reject"
)

// maxCachedRetry is the number of distinct Retry-After values whose bodies
// are cached per stage and class; with a wider jitter the rest are
// rendered per rejection.
const maxCachedRetry = 64

// bodyData is what the reject body template sees.
type bodyData struct {
	// Stage and Class name the rejected request's stage and class.
	Stage, Class string
	// RetryAfter is the Retry-After value sent, in whole seconds.
	RetryAfter int
}

// executor is a parsed text/template or html/template.
type executor interface {
	Execute(w io.Writer, data any) error
}

// rejecter writes rejections. Bodies are rendered once per stage, class
// and Retry-After value and then reused.
type rejecter struct {
	status    int
	retry     time.Duration // least value
	retryMax  time.Duration // greatest value before jitter
	jitter    time.Duration
	ctype     string
	mediaType string
	tmpl      executor

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	// cache[stage][class][secs-base] holds rendered bodies.
	cache [][][]atomic.Pointer[rendered]
}

// rendered is one stage/class/Retry-After answer.
type rendered struct {
	secs string
	text []byte
	json []byte
}

func newRejecter(r *RejectConfig, mediaType string) (*rejecter, error) {
	rej := &rejecter{status: r.Status, retry: r.RetryAfter, retryMax: max(r.RetryAfterMax, r.RetryAfter), jitter: r.RetryJitter, ctype: r.ContentType, mediaType: mediaType}
	var err error
	if mediaType == "text/html" {
		rej.tmpl, err = htmltemplate.New("reject").Parse(r.Body)
	} else {
		rej.tmpl, err = template.New("reject").Parse(r.Body)
	}
	if err != nil {
		return nil, err
	}
	return rej, nil
}

// bind sizes the cache for the policy's stages and classes and sets the
// random source of the jitter (nil: the global source).
func (r *rejecter) bind(stages, classes int, rng *rand.Rand) {
	r.rng = rng
	n := ceilSecs(r.retryMax+r.jitter) - ceilSecs(r.retry) + 1
	n = min(n, maxCachedRetry)
	r.cache = make([][][]atomic.Pointer[rendered], stages)
	for i := range r.cache {
		r.cache[i] = make([][]atomic.Pointer[rendered], classes)
		for c := range r.cache[i] {
			r.cache[i][c] = make([]atomic.Pointer[rendered], n)
		}
	}
}

// baseSecs is RetryAfter in whole seconds, rounded up.
func ceilSecs(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// retrySecs draws the Retry-After value for a stage's computed wait d:
// ⌈retryDelay(d)/1s⌉.
func (r *rejecter) retrySecs(d time.Duration) int { return ceilSecs(r.retryDelay(d)) }

// retryDelay draws the delay a rejected caller is asked to wait for a
// stage's computed wait d: clamp(d, retry_after, retry_after_max) +
// U·jitter, U uniform in [0, 1].
func (r *rejecter) retryDelay(d time.Duration) time.Duration {
	d = min(max(d, r.retry), r.retryMax)
	if r.jitter > 0 {
		var j int64
		if r.rng != nil {
			r.mu.Lock()
			j = r.rng.Int64N(int64(r.jitter) + 1)
			r.mu.Unlock()
		} else {
			j = rand.Int64N(int64(r.jitter) + 1)
		}
		d += time.Duration(j)
	}
	return d
}

func (r *rejecter) body(stageIdx int, stageName string, class int, className string, secs int) *rendered {
	var slot *atomic.Pointer[rendered]
	if i := secs - ceilSecs(r.retry); stageIdx < len(r.cache) && class < len(r.cache[stageIdx]) && i >= 0 && i < len(r.cache[stageIdx][class]) {
		slot = &r.cache[stageIdx][class][i]
		if b := slot.Load(); b != nil {
			return b
		}
	}
	b := r.render(stageName, className, secs)
	if slot != nil {
		slot.Store(b)
	}
	return b
}

func (r *rejecter) render(stageName, className string, secs int) *rendered {
	var buf bytes.Buffer
	if err := r.tmpl.Execute(&buf, bodyData{Stage: stageName, Class: className, RetryAfter: secs}); err != nil {
		buf.Reset()
		buf.WriteString("503 overloaded, retry after " + strconv.Itoa(secs) + " s\n")
	}
	j, _ := json.Marshal(struct {
		Error      string `json:"error"`
		Stage      string `json:"stage"`
		Class      string `json:"class"`
		RetryAfter int    `json:"retry_after_s"`
	}{"overloaded", stageName, className, secs})
	return &rendered{secs: strconv.Itoa(secs), text: buf.Bytes(), json: append(j, '\n')}
}

// write writes the rejection; wait is the stage's computed Retry-After
// before bounds and jitter.
func (r *rejecter) write(w http.ResponseWriter, req *http.Request, stageIdx int, stageName string, class int, className string, wait time.Duration) {
	b := r.body(stageIdx, stageName, class, className, r.retrySecs(wait))
	data, ct := b.text, r.ctype
	if prefersJSON(req.Header["Accept"], r.mediaType) {
		data, ct = b.json, "application/json"
	}
	reject.WriteHTTP(w, req, r.status, b.secs, ct, data)
}

// prefersJSON reports whether the Accept header lines prefer
// application/json to the media type text (RFC 9110 §12.5.1): the q-value
// of the most specific range matching application/json is positive and
// higher than text's, or equal to it with a more specific match, or
// equally specific and listed first. So "application/json, */*" and
// "application/json, text/plain" prefer JSON, "*/*" and "text/plain,
// application/json" do not. It does not allocate.
func prefersJSON(accept []string, text string) bool {
	if len(accept) == 0 {
		return false
	}
	var qj, qt float64
	sj, st, pj, pt, pos := 0, 0, 0, 0, 0
	for _, line := range accept {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ",")
			mr, q := parseRange(part)
			if mr == "" {
				continue
			}
			pos++
			if s := specificity(mr, "application/json"); s > sj {
				sj, qj, pj = s, q, pos
			}
			if s := specificity(mr, text); s > st {
				st, qt, pt = s, q, pos
			}
		}
	}
	return sj > 0 && qj > 0 && (qj > qt || (qj == qt && (sj > st || (sj == st && pj < pt))))
}

// parseRange splits "type/sub;q=0.5;x=y" into the trimmed range and its
// q-value (1 when absent or unparsable, clamped to [0, 1]).
func parseRange(s string) (string, float64) {
	mr, params, _ := strings.Cut(s, ";")
	mr = strings.TrimSpace(mr)
	q := 1.0
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && (k == "q" || k == "Q") {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				q = min(max(f, 0), 1)
			}
		}
	}
	return mr, q
}

// specificity is 3 for an exact match of media type mt by range mr, 2 for
// "type/*", 1 for "*/*", 0 for no match.
func specificity(mr, mt string) int {
	if strings.EqualFold(mr, mt) {
		return 3
	}
	if mr == "*/*" {
		return 1
	}
	typ, sub, ok := strings.Cut(mr, "/")
	if ok && sub == "*" {
		if mtyp, _, _ := strings.Cut(mt, "/"); strings.EqualFold(typ, mtyp) {
			return 2
		}
	}
	return 0
}
