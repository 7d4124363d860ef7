package azurite

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"time"
)

// StorageAudience is the audience of a Microsoft Entra ID token for Azure
// Storage, the one the Azure SDK asks for by default (with "/.default" as
// its scope).
const StorageAudience = "https://storage.azure.com"

// tokenIssuer is a Microsoft Entra ID issuer: Azurite's basic OAuth accepts
// a token whose issuer starts with https://sts.windows.net/ (or another
// cloud's). The tenant is made up.
const tokenIssuer = "https://sts.windows.net/00000000-0000-0000-0000-000000000000/"

// Token returns a bearer token for an instance started with Options.OAuth:
// a JWT for audience, valid from notBefore until expires. Azurite's basic
// OAuth (as of 3.37) decodes the token without checking its signature and
// checks that it has iat, nbf and exp and is within them, that its issuer
// is a Microsoft Entra ID one, and that its audience is Azure Storage's
// (StorageAudience, its application id, or the account's own service
// URL); it checks no roles. Any other audience, or a lifetime that has
// ended, is refused with 403 AuthenticationFailed; the service, at recent
// API versions, answers 401 InvalidAuthenticationInfo with a Bearer
// challenge. The token is signed with a random key, so it is good for an
// emulator and nothing else.
func Token(audience string, notBefore, expires time.Time) string {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"aud": audience,
		"iss": tokenIssuer,
		"iat": notBefore.Unix(),
		"nbf": notBefore.Unix(),
		"exp": expires.Unix(),
		"oid": "00000000-0000-0000-0000-000000000001",
		"tid": "00000000-0000-0000-0000-000000000000",
		"sub": "azdispatch-test",
	})
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand panics rather than return an error)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}
