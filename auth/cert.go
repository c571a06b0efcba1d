package auth

import "crypto/x509"

// certUser is the user that cert names by the rule from (CertUserCN or
// CertUserSAN), or "" when it names none.
func certUser(cert *x509.Certificate, from string) string {
	switch from {
	case CertUserCN:
		return cert.Subject.CommonName
	case CertUserSAN:
		switch {
		case len(cert.DNSNames) > 0:
			return cert.DNSNames[0]
		case len(cert.EmailAddresses) > 0:
			return cert.EmailAddresses[0]
		case len(cert.URIs) > 0 && cert.URIs[0] != nil:
			return cert.URIs[0].String()
		}
	}
	return ""
}
