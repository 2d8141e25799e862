package fingerprint_test

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/fingerprint"
)

// ExampleCaptureTLS wires JA3/JA4 capture into an HTTPS server: the
// handshake fills the connection's slot, handlers read it.
func ExampleCaptureTLS() {
	base := &tls.Config{ /* Certificates: ... */ }
	cfg, err := fingerprint.CaptureTLS(base)
	if err != nil {
		panic(err)
	}
	srv := &http.Server{
		Addr:        ":8443",
		TLSConfig:   cfg,
		ConnContext: fingerprint.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fp, ok := fingerprint.TLSFromContext(r.Context()); ok {
				fmt.Fprintln(w, "JA4", fp.JA4)
			}
		}),
	}
	_ = srv // srv.ListenAndServeTLS("", "")
}
