// SPDX-License-Identifier: Apache-2.0

// Package buffer is the proxy's spooler (Spool): bodies held in memory,
// then in an unlinked temporary file, for response buffering (its config
// section response_buffering, nginx's proxy_buffering) and for request
// buffering (the downstream guard's request_buffering); and the memory
// of responses: 32 KiB chunks shared with ReverseProxy's copy buffers,
// within one budget (Pool).
//
// Without it, ReverseProxy reads a backend's response 32 KiB at a time
// and writes each piece to the client before it reads the next: a client
// that reads slowly keeps the backend's response unread, and with it the
// backend's worker, the upstream connection, the pool slot, the stage's
// concurrency and the response-time sample (which ends at the last byte
// read from the backend). A thousand slow readers of large
// responses hold every slot.
//
// With it, each response body is read from the backend by a filler of its
// own, as fast as the backend sends it, into a spool: 32 KiB chunks of
// memory (at most memory_bytes of one response, max_memory_bytes of all
// of them), then an unlinked temporary file (at most max_file_bytes of
// one response, max_disk_bytes of all). ReverseProxy reads the spool and
// writes to the client at the client's pace, so the backend is released
// when it has sent its last byte. A fast client reads the spool as fast
// as it fills: memory is given back as the client reads, and the disk is
// only used for what a slow client leaves behind. What a client has not
// read within parkAfter of the backend's last byte moves from memory to
// the file (park), so that slow readers do not keep the memory from the
// clients that keep up.
//
// The filler is a goroutine, except that its first read is made by the
// handler's goroutine (prime): a response whose body arrived with its
// headers (every small one) is read whole there, with no goroutine and no
// wait, at the cost of one copy.
//
// A response of known length over HTTP/1.x is primed as soon as the
// proxy has its headers (Start), so that a client share's delay runs
// while the backend's response is read; one that may carry trailers
// (chunked, HTTP/2) is
// primed at ReverseProxy's first read of the body, after ReverseProxy has
// looked at its trailer keys: the filler fills the response's Trailer map
// when it reaches the end, and ReverseProxy reads the map again only
// after the spool's end.
//
// When neither memory nor disk can be had within the caps, the filler
// waits for the client to read what is already spooled (retrying the
// caps every budgetRetry), and once the client has read it all, it reads
// one piece at a time from the backend into a chunk of its own: the
// pass-through of an unbuffered response, with back-pressure on the
// backend. Nothing is refused, lost or answered 5xx because of
// buffering. A response that falls back like this, or that finds no room
// at all when it starts (it is then passed through without a spool), is
// counted in proxy_responses_unbuffered_total{reason="budget"}; the time
// its filler waited for the client is not the backend's (it is left out
// of the response-time sample).
//
// A backend error in the middle of a body is handed to ReverseProxy
// after the bytes that came before it, as it would be without buffering:
// the client gets those bytes and then a connection closed before the
// end of the body (never a complete-looking answer). The backend's slot
// and the stage's sample are released when the error happens. A client
// that goes away (send_timeout, a reset) ends its request: the spool's
// memory and file are freed at once, or, while the filler is still
// reading, as soon as the request's context ends and the filler's read
// with it.
//
// A request body that the downstream guard (package proxy/guard,
// request_buffering) reads whole before admission is the same spool,
// filled whole by Fill on the guard's goroutine before anything reads
// it: request_buffer_bytes in memory of its own (not the responses'
// budget: neither direction can starve the other), the rest in a file
// named sluice-body-* (the responses' are sluice-resp-PID-*).
package buffer
