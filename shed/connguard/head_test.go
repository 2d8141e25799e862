package connguard

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func TestReadHead(t *testing.T) {
	const get = "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n"
	cases := []struct {
		in   string
		n    int
		head bool
		v    headVerdict
	}{
		{get, len(get), false, headBodiless},
		{get + "GET /next", len(get), false, headBodiless},
		{"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", len("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"), true, headBodiless},
		{"POST / HTTP/1.1\r\nHost: h\r\n\r\n", len("POST / HTTP/1.1\r\nHost: h\r\n\r\n"), false, headBodiless}, // no Content-Length: no body
		{"GET / HTTP/1.1\r\nHost: h\r\nConnection:  Keep-Alive \r\n\r\n", len("GET / HTTP/1.1\r\nHost: h\r\nConnection:  Keep-Alive \r\n\r\n"), false, headBodiless},
		{"GET / HTTP/1.1\r\nhOST:h\r\nX-Empty:\r\n\r\n", len("GET / HTTP/1.1\r\nhOST:h\r\nX-Empty:\r\n\r\n"), false, headBodiless},
		// The server's to read: a body, a close, an upgrade, another version.
		{"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", 0, false, headPass},
		{"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", 0, false, headPass},
		{"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0, false, headPass},
		{"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\r\n", 0, false, headPass},
		{"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n", 0, false, headPass},
		{"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n", 0, false, headPass},
		{"GET / HTTP/1.0\r\nHost: h\r\n\r\n", 0, false, headPass},
		{"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 0, false, headPass},
		// Not parsed here: left to the server.
		{"GET / HTTP/1.1\r\n\r\n", 0, false, headPass},                                // no Host
		{"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 0, false, headPass},          // two
		{"GET / HTTP/1.1\nHost: h\n\n", 0, false, headPass},                           // bare LF
		{"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", 0, false, headPass},               // bare LF in a field
		{"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 0, false, headPass},       // obsolete folding
		{"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 0, false, headPass},                    // space before the colon
		{"GET / HTTP/1.1\r\nHost: h\x00\r\n\r\n", 0, false, headPass},                 // a control byte
		{"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 0, false, headForeign},               // a space in the target: no HTTP/1.1 request line
		{"get / HTTP/1.1\r\nHost: h\r\n\r\n", 0, false, headForeign},                  // not a method here
		{"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 0, false, headPass},                    // an empty target
		{"GET / HTTP/1.1\r\nHost: h\r\n\r", 0, false, headPass},                       // not whole yet
		{"GET / HTTP/1.1\r\nHost: h\r\n", 0, false, headPass},                         // not whole yet
		{"GET / HTTP/1", 0, false, headPass},                                          // not whole yet
		{"GE", 0, false, headPass},                                                    // not whole yet
		{"", 0, false, headPass},                                                      // nothing yet
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, false, headForeign},                   // the HTTP/2 preface
		{"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 0, false, headForeign},                  // another major version
		{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 0, false, headForeign},       // a TLS ClientHello
		{strings.Repeat("A", maxMethod+1) + " / HTTP/1.1\r\n", 0, false, headForeign}, // no method this long
	}
	for _, tc := range cases {
		n, head, v := readHead([]byte(tc.in))
		if n != tc.n || head != tc.head || v != tc.v {
			t.Errorf("readHead(%q) = %d, %v, %d; want %d, %v, %d", tc.in, n, head, v, tc.n, tc.head, tc.v)
		}
	}
}

// readHead never answers a request that net/http would frame otherwise:
// what it takes for a whole bodiless head ends at the head's first empty
// line, and where net/http reads it as a request at all, it reads it as a
// bodiless HTTP/1.1 request of the same method that keeps its connection,
// and reads the request after it where readHead says it starts.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"HEAD /x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
		"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	const next = "GET /next HTTP/1.1\r\nHost: n\r\n\r\n"
	f.Fuzz(func(t *testing.T, b []byte) {
		n, head, v := readHead(b)
		if v != headBodiless {
			if n != 0 || head {
				t.Fatalf("%d, %v with verdict %d", n, head, v)
			}
			return
		}
		if n > len(b) || n < 4 || !bytes.Equal(b[n-4:n], []byte("\r\n\r\n")) || bytes.Index(b, []byte("\r\n\r\n")) != n-4 {
			t.Fatalf("head of %d bytes of %q", n, b)
		}
		br := bufio.NewReader(bytes.NewReader(append(append([]byte(nil), b[:n]...), next...)))
		r, err := http.ReadRequest(br)
		if err != nil {
			return // a request net/http answers 400 and closes on: no framing to disagree with
		}
		if r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.ContentLength != 0 || len(r.TransferEncoding) > 0 || r.Close ||
			head != (r.Method == http.MethodHead) || r.Method != string(b[:bytes.IndexByte(b, ' ')]) {
			t.Fatalf("net/http read %q as %s %s, body %d %v, close %v", b[:n], r.Method, r.Proto, r.ContentLength, r.TransferEncoding, r.Close)
		}
		if after, err := http.ReadRequest(br); err != nil || after.URL.Path != "/next" {
			t.Fatalf("the request after %q: %v, %v", b[:n], after, err)
		}
	})
}

// BenchmarkReadHead: what WithEarlyAnswer adds to a request that is not
// shed, for a browser-like head of eight fields (about 400 bytes).
func BenchmarkReadHead(b *testing.B) {
	head := []byte("GET /api/v1/items?page=2 HTTP/1.1\r\nHost: api.example.com\r\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36\r\n" +
		"Accept: application/json, text/plain, */*\r\nAccept-Language: en-US,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n" +
		"Connection: keep-alive\r\nCookie: session=0123456789abcdef0123456789abcdef\r\nReferer: https://example.com/items\r\n\r\n")
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if _, _, v := readHead(head); v != headBodiless {
			b.Fatal(v)
		}
	}
}
