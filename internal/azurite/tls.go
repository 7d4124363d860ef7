package azurite

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLifetime is how long a generated certificate is valid: far longer
// than any test, so that a slow machine never sees it expire.
const certLifetime = 7 * 24 * time.Hour

// writeSelfSigned makes a self-signed certificate for the loopback
// addresses Azurite listens on, writes it and its key as PEM files into
// dir (for Azurite's --cert and --key), and returns the pool that trusts it.
// It is made with crypto/x509 alone, so that no openssl is needed on any OS.
func writeSelfSigned(dir string) (certFile, keyFile string, roots *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, fmt.Errorf("azurite: certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", nil, fmt.Errorf("azurite: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "azdispatch test Azurite"},
		NotBefore:    now.Add(-time.Hour), // tolerate a little clock skew
		NotAfter:     now.Add(certLifetime),
		// Its own root: a CA, so that verifiers that insist on one accept it.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, fmt.Errorf("azurite: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, fmt.Errorf("azurite: certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", nil, fmt.Errorf("azurite: certificate key: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("azurite: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("azurite: %w", err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots, nil
}

// TLSConfig returns a new client TLS configuration that trusts the
// emulator's certificate, for an HTTPS instance (see Options.HTTPS); nil for
// one over plain HTTP or an external account. Pass it to the SDK through
// the Transport of its client options.
func (i *Instance) TLSConfig() *tls.Config {
	if i.roots == nil {
		return nil
	}
	return &tls.Config{RootCAs: i.roots, MinVersion: tls.VersionTLS12}
}
