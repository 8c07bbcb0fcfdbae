// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
)

// EventReader reads the dashboard's event stream (GET /ui/events, a
// text/event-stream): each event's id ("BOOT-SEQ", what Last-Event-ID
// resumes from) and its sample. For Go clients of the stream, such as
// tests and tools that record a run. Not safe for concurrent use.
type EventReader struct{ br *bufio.Reader }

// NewEventReader reads events from r, the stream's body.
func NewEventReader(r io.Reader) *EventReader { return &EventReader{br: bufio.NewReader(r)} }

// Next returns the next event's id and sample; an error when the stream
// ends or a sample does not decode.
func (e *EventReader) Next() (id string, s Sample, err error) {
	for {
		line, err := e.br.ReadString('\n')
		if err != nil {
			return id, s, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &s); err != nil {
				return id, s, err
			}
		case line == "" && id != "":
			return id, s, nil
		}
	}
}
