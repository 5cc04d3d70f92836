package pki

import (
	"errors"
	"testing"
)

func TestVerifyCAProof(t *testing.T) {
	const token = "6c1e2d3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
	extCA, extKey := selfSignedCA(t, "external")
	otherCA, otherKey := selfSignedCA(t, "other")
	caPEM := EncodePEM(extCA)

	tests := []struct {
		name  string
		proof []byte
		token string
		want  error
	}{
		{"good", EncodePEM(leafFrom(t, extCA, extKey, token)), token, nil},
		{"wrong CN", EncodePEM(leafFrom(t, extCA, extKey, "someone")), token, ErrInvalidCommonName},
		{"empty token", EncodePEM(leafFrom(t, extCA, extKey, "")), "", ErrInvalidCommonName},
		{"other CA", EncodePEM(leafFrom(t, otherCA, otherKey, token)), token, ErrCertificateFailedValidation},
		{"not PEM", []byte(token), token, ErrInvalidCertificate},
	}
	for _, tt := range tests {
		err := VerifyCAProof(caPEM, tt.proof, tt.token, epoch)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}

	good := EncodePEM(leafFrom(t, extCA, extKey, token))
	if err := VerifyCAProof(caPEM, good, token, epoch.AddDate(0, 0, 2)); !errors.Is(err, ErrCertificateFailedValidation) {
		t.Errorf("expired proof: err = %v", err)
	}
	if err := VerifyCAProof(nil, good, token, epoch); !errors.Is(err, ErrInvalidCertificate) {
		t.Errorf("no CA: err = %v", err)
	}
}
