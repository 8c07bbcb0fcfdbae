// SPDX-License-Identifier: Apache-2.0

package doccheck

import "strings"

// CodeBlock is a fenced code block of a Markdown document, with the
// headings above it.
type CodeBlock struct {
	// Headings are the titles of the enclosing sections, outermost first.
	Headings []string
	// Lang is the fence's info string ("sh", "yaml"; "" for none).
	Lang string
	// Line is the line of the opening fence, counted from 1.
	Line int
	// Text is the block's content, every line ended by "\n".
	Text string
}

// Under reports whether the block is inside the section titled heading,
// at any depth.
func (c *CodeBlock) Under(heading string) bool {
	for _, h := range c.Headings {
		if h == heading {
			return true
		}
	}
	return false
}

// CodeBlocks returns the fenced code blocks of a document, in order, for
// the tests that run the commands a document shows (ParseMarkdown skips
// them).
func CodeBlocks(src string) []CodeBlock {
	var out []CodeBlock
	var heads []string
	var cur *CodeBlock
	var text strings.Builder
	for i, line := range strings.Split(src, "\n") {
		trim := strings.TrimSpace(line)
		if cur != nil {
			if strings.HasPrefix(trim, "```") {
				cur.Text = text.String()
				out = append(out, *cur)
				cur = nil
				continue
			}
			text.WriteString(line + "\n")
			continue
		}
		if lang, ok := strings.CutPrefix(trim, "```"); ok {
			cur = &CodeBlock{Headings: append([]string(nil), heads...), Lang: strings.TrimSpace(lang), Line: i + 1}
			text.Reset()
			continue
		}
		if m := reHeading.FindStringSubmatch(line); m != nil {
			heads = underHeading(heads, m)
		}
	}
	return out
}

// underHeading returns the path of headings heads (one per level, "" for a
// level skipped) after the heading m matched by reHeading: the headings of
// its level and below end, and it is added at its level.
func underHeading(heads []string, m []string) []string {
	level := len(m[1])
	for len(heads) >= level {
		heads = heads[:len(heads)-1]
	}
	for len(heads) < level-1 {
		heads = append(heads, "")
	}
	return append(heads, m[2])
}
