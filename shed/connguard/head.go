package connguard

// headVerdict is what readHead makes of the bytes at the start of a
// request on an HTTP/1.1 connection.
type headVerdict int8

const (
	// headPass: not a whole request head yet, or one the server must read
	// itself (a body, another version, an upgrade, a header the Guard does
	// not parse): the bytes go to the server.
	headPass headVerdict = iota
	// headBodiless: a whole HTTP/1.1 request head that has no body and
	// keeps its connection, which the Guard may answer in place of the
	// server.
	headBodiless
	// headForeign: not HTTP/1.x at all (TLS, the HTTP/2 preface): the
	// Guard leaves the connection to the server for good.
	headForeign
)

// maxMethod is the longest method readHead takes.
const maxMethod = 16

// readHead reads the request head at the start of b, strictly: a request
// line of an upper-case method, a target of visible ASCII and HTTP/1.1,
// then header fields of a token, a colon and a value of visible ASCII,
// spaces, tabs and bytes from 0x80, every line ended by CRLF, the head by
// an empty line. For headBodiless it returns the head's length n and
// whether the method is HEAD (whose answer has no body). A head is
// bodiless when it has exactly one Host field and no Content-Length,
// Transfer-Encoding, Upgrade or Expect field, and a Connection field, if
// any, says keep-alive alone: under RFC 9112 such a request has no body,
// and net/http frames it so (FuzzReadHead checks readHead against
// http.ReadRequest). Anything it does not parse, a bare LF, an obsolete
// line folding, a control byte, is left to the server (headPass): the
// server sees exactly the bytes it would have seen without the Guard.
func readHead(b []byte) (n int, head bool, v headVerdict) {
	i := 0
	for i < len(b) && b[i] >= 'A' && b[i] <= 'Z' {
		if i++; i > maxMethod {
			return 0, false, headForeign
		}
	}
	switch {
	case i == len(b):
		return 0, false, headPass
	case i == 0 || b[i] != ' ':
		return 0, false, headForeign
	}
	method := string(b[:i]) // no allocation: compared, never kept
	switch method {
	case "PRI": // the HTTP/2 preface
		return 0, false, headForeign
	case "CONNECT":
		return 0, false, headPass
	}
	head = method == "HEAD"
	i++
	start := i
	for i < len(b) && b[i] > ' ' && b[i] < 0x7f {
		i++
	}
	switch {
	case i == len(b):
		return 0, false, headPass
	case i == start || b[i] != ' ':
		return 0, false, headPass
	}
	i++
	const version = "HTTP/1.1\r\n"
	for k := range len(version) {
		switch {
		case i+k == len(b):
			return 0, false, headPass
		case b[i+k] != version[k]:
			if k < len("HTTP/") || b[i+len("HTTP/")] != '1' {
				return 0, false, headForeign
			}
			return 0, false, headPass // HTTP/1.0, or a malformed line: the server's to answer
		}
	}
	i += len(version)
	hosts := 0
	for {
		if i+1 >= len(b) {
			return 0, false, headPass
		}
		if b[i] == '\r' {
			if b[i+1] != '\n' || hosts != 1 {
				return 0, false, headPass
			}
			return i + 2, head, headBodiless
		}
		start := i
		for i < len(b) && isToken(b[i]) {
			i++
		}
		if i == len(b) || i == start || b[i] != ':' {
			return 0, false, headPass
		}
		name := b[start:i]
		i++
		vs := i
		for i < len(b) && (b[i] == '\t' || b[i] >= ' ' && b[i] != 0x7f) {
			i++
		}
		if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
			return 0, false, headPass
		}
		value := trimSpace(b[vs:i])
		i += 2
		switch {
		case equalFold(name, "host"):
			hosts++
		case equalFold(name, "content-length"), equalFold(name, "transfer-encoding"),
			equalFold(name, "upgrade"), equalFold(name, "expect"):
			return 0, false, headPass
		case equalFold(name, "connection") && !equalFold(value, "keep-alive"):
			return 0, false, headPass
		}
	}
}

// isToken reports whether c may be in a field name (RFC 9110 tchar).
func isToken(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// trimSpace returns b without its leading and trailing spaces and tabs.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold reports whether b is lower, an ASCII lower-case string, in any
// case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
