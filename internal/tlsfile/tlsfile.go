// SPDX-License-Identifier: Apache-2.0

// Package tlsfile reads the PEM files of TLS settings: certificate
// chains with their private keys, and CA bundles. Its errors name the
// input (certificate, key or CA bundle) and the PEM block, and never
// quote a file's bytes, so that a private key cannot reach a log line or
// an error message through them.
//
// Read takes the contents of a set of files at once with a digest of
// them: a watcher compares digests (not paths or modification times,
// which a Kubernetes Secret volume's symlink swap leaves unchanged) and
// parses the very bytes it hashed.
package tlsfile

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"strings"
)

// The inputs an Error names.
const (
	InputCert = "certificate"
	InputKey  = "key"
	InputCA   = "CA bundle"
)

// Error is a problem with one input of a TLS setting. Its message never
// holds the input's bytes.
type Error struct {
	// Input is InputCert, InputKey or InputCA.
	Input string
	Msg   string
}

func (e *Error) Error() string { return e.Input + ": " + e.Msg }

func errorf(input, format string, args ...any) error {
	return &Error{Input: input, Msg: fmt.Sprintf(format, args...)}
}

// MaxFileBytes bounds one file read by Read: a certificate chain or a CA
// bundle is a few kilobytes (Debian's whole system bundle is about
// 220 KiB).
const MaxFileBytes = 4 << 20

// ReadError is a file that Read could not read: a missing file, a
// directory, a file over MaxFileBytes.
type ReadError struct {
	// Index is the file's place in Read's names, Name its name.
	Index int
	Name  string
	Err   error
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Read reads every file of names and returns their contents, in order,
// and a SHA-256 digest of the names and contents together. An error is
// a *ReadError naming the file that could not be read.
func Read(names []string) (data [][]byte, sum [sha256.Size]byte, err error) {
	h := sha256.New()
	var n [8]byte
	for i, name := range names {
		b, err := readFile(name)
		if err != nil {
			return nil, sum, &ReadError{Index: i, Name: name, Err: err}
		}
		for _, part := range [][]byte{[]byte(name), b} {
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
		data = append(data, b)
	}
	copy(sum[:], h.Sum(nil))
	return data, sum, nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%q cannot be read: %w", name, unwrapPath(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%q is a directory, not a PEM file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%q cannot be read: %w", name, unwrapPath(err))
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%q is larger than %d bytes: not a PEM certificate file", name, MaxFileBytes)
	}
	return b, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParseCerts parses PEM data holding one or more CERTIFICATE blocks (a
// chain, or a CA bundle): text between blocks is skipped, as in the
// system bundles, but a block of another type (a private key put in the
// wrong file) or a certificate that does not parse is an error naming
// the block, counted from 1. input is the Error's Input.
func ParseCerts(input string, data []byte) ([]*x509.Certificate, error) {
	return parseCerts(input, data, false)
}

// parseCerts is ParseCerts; skipKeys skips private key blocks (a chain
// and its key in one file, which nginx and HAProxy accept).
func parseCerts(input string, data []byte, skipKeys bool) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for i, b := range pemBlocks(data) {
		if skipKeys && strings.HasSuffix(b.Type, "PRIVATE KEY") {
			continue
		}
		if b.Type != "CERTIFICATE" {
			return nil, errorf(input, "PEM block %d is %s: only CERTIFICATE blocks belong here", i, blockType(b.Type))
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, errorf(input, "PEM block %d is not a valid certificate: %v", i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errorf(input, "holds no PEM CERTIFICATE block")
	}
	return out, nil
}

// pemBlocks yields the PEM blocks of data with their number, counted
// from 1; text between blocks is skipped.
func pemBlocks(data []byte) iter.Seq2[int, *pem.Block] {
	return func(yield func(int, *pem.Block) bool) {
		rest := data
		for i := 1; ; i++ {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil || !yield(i, b) {
				return
			}
		}
	}
}

// blockType names a PEM block's type for a message: a key as a key, a
// well-known type by its name, any other type without quoting it, so
// that no stray bytes of a file are echoed.
func blockType(t string) string {
	if strings.HasSuffix(t, "PRIVATE KEY") {
		return "a private key"
	}
	switch t {
	case "PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST", "TRUSTED CERTIFICATE", "X509 CRL", "EC PARAMETERS", "DH PARAMETERS":
		return fmt.Sprintf("%q", t)
	}
	return "of another type"
}

// ParseCAs parses a CA bundle into a pool (see ParseCerts), and returns
// its certificates too.
func ParseCAs(data []byte) (*x509.CertPool, []*x509.Certificate, error) {
	certs, err := ParseCerts(InputCA, data)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, certs, nil
}

// ParsePair parses a PEM certificate chain (leaf first) and the PEM
// private key of its leaf. The chain is checked as ParseCerts does; the
// key must be one PEM private key block (PKCS #1, PKCS #8 or SEC 1)
// matching the leaf's public key. A file may hold both (the same file
// given twice): the chain's private key block and the key's certificate
// blocks are skipped. The result's Leaf is set.
func ParsePair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	certs, err := parseCerts(InputCert, certPEM, true)
	if err != nil {
		return tls.Certificate{}, err
	}
	var keyBlock *pem.Block
	for i, b := range pemBlocks(keyPEM) {
		if b.Type == "CERTIFICATE" {
			continue
		}
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return tls.Certificate{}, errorf(InputKey, "PEM block %d is %s, not a private key", i, blockType(b.Type))
		}
		if keyBlock != nil {
			return tls.Certificate{}, errorf(InputKey, "holds more than one private key")
		}
		keyBlock = b
	}
	if keyBlock == nil {
		return tls.Certificate{}, errorf(InputKey, "holds no PEM private key block")
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(keyBlock))
	if err != nil {
		// crypto/tls's messages name the problem (no match, an unknown
		// algorithm, a key that does not parse), never the key's bytes.
		return tls.Certificate{}, errorf(InputKey, "%s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	if pair.Leaf == nil {
		pair.Leaf = certs[0]
	}
	return pair, nil
}

// Versions are the accepted minimum TLS versions, by their names in a
// configuration file.
var Versions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// ParseVersion returns the TLS version named "1.2" or "1.3". TLS 1.0 and
// 1.1 are refused: RFC 8996 deprecates them.
func ParseVersion(s string) (uint16, error) {
	if v, ok := Versions[s]; ok {
		return v, nil
	}
	if s == "1.0" || s == "1.1" {
		return 0, fmt.Errorf("%q is deprecated (RFC 8996): use 1.2 or 1.3", s)
	}
	return 0, fmt.Errorf("%q is not a TLS version: use 1.2 or 1.3", s)
}
