// Package sasperm knows what each storage request asks of its credential,
// so that an error for a refused request can say which permission, resource
// type or service a SAS lacks, rather than only the service's code.
package sasperm

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// access is what one storage operation asks of its credential, as "Create an
// account SAS" and "Create a service SAS" in the Azure Storage REST reference
// list it: a SAS permission on a resource, which for an account SAS also
// takes a resource type (srt) and a service (ss).
type access struct {
	permission   string // the least SAS permission that allows it: "Process", "Create", …
	on           string // what the permission applies to: "the queue", "the blob", …
	resourceType string // the account SAS resource type the service documents: "Object" or "Container"
	// azuriteType is the resource type Azurite (3.37) asks for where it
	// differs from the service's documentation: it checks Delete Message
	// and Update Message against Container, the service against Object.
	azuriteType string
	service     string // "Queue" or "Blob"
}

// accessFor returns what the operation named o (an azdispatch.Op) needs.
// One op may stand for several REST operations ("blob write" is Put Blob,
// Create Container or Set Blob Metadata); req, the failed request if known,
// tells them apart. ok is false for an operation of no known kind.
func accessFor(o string, req *http.Request) (a access, ok bool) {
	queue := func(permission, resourceType string) access {
		return access{permission: permission, on: "the queue", resourceType: resourceType, service: "Queue"}
	}
	blob := func(permission, on, resourceType string) access {
		return access{permission: permission, on: on, resourceType: resourceType, service: "Blob"}
	}
	switch o {
	case "send": // Put Message
		return queue("Add", "Object"), true
	case "receive": // Get Messages
		return queue("Process", "Object"), true
	case "delete": // Delete Message
		a = queue("Process", "Object")
		a.azuriteType = "Container"
		return a, true
	case "update": // Update Message: releases and renewals
		a = queue("Update", "Object")
		a.azuriteType = "Container"
		return a, true
	case "depth": // Get Queue Metadata (the approximate message count)
		return queue("Read", "Container"), true
	case "set queue metadata": // Set Queue Metadata: a pause, a resume
		return queue("Write", "Container"), true
	case "create": // Create Queue; a queue SAS cannot grant it
		return queue("Create", "Container"), true
	case "blob read": // Get Blob, Get Blob Properties
		return blob("Read", "the blob", "Object"), true
	case "blob delete": // Delete Blob
		return blob("Delete", "the blob", "Object"), true
	case "blob lease": // Lease Blob
		return blob("Write", "the blob", "Object"), true
	case "blob list": // List Blobs
		return blob("List", "the container", "Container"), true
	case "blob write":
		var q url.Values
		if req != nil && req.URL != nil {
			q = req.URL.Query()
		}
		switch {
		case q.Get("restype") == "container" && q.Get("comp") == "": // Create Container
			return blob("Create", "the container", "Container"), true
		case q.Get("comp") == "metadata": // Set Blob Metadata: checkpoints, marking poisoned
			return blob("Write", "the blob", "Object"), true
		case req != nil: // Put Blob of a new blob (Write would also overwrite one)
			return blob("Create", "the blob", "Object"), true
		}
		return blob("Create or Write", "the blob", "Object"), true
	}
	return access{}, false
}

// Hint says, for a request of op (an azdispatch.Op's name) refused with
// status and code, what the operation needs, so that the error names the
// missing piece rather than only the service's code; req, the failed
// request if known, tells apart the REST operations one op stands for. It
// is "" for any other error. The codes are the service's; Azurite (3.37)
// answers the same ones for an account SAS, and AuthorizationFailure
// (which the service gives for a credential or network rule that refuses
// the request as a whole) also where a SAS has expired or its signature
// does not match, for which the service answers AuthenticationFailed.
func Hint(op string, status int, code string, req *http.Request) string {
	if status != http.StatusForbidden {
		return ""
	}
	a, ok := accessFor(op, req)
	if !ok {
		return ""
	}
	needs := "the credential needs the " + a.permission + " permission on " + a.on
	switch code {
	case "AuthorizationPermissionMismatch":
		return " (" + needs + ")"
	case "AuthorizationResourceTypeMismatch":
		s := " (an account SAS needs the " + a.resourceType + " resource type for this"
		if a.azuriteType != "" {
			s += "; Azurite asks for the " + a.azuriteType + " resource type"
		}
		return s + ")"
	case "AuthorizationServiceMismatch":
		return " (an account SAS needs the " + a.service + " service for this)"
	case "AuthorizationFailure":
		if credentialOf(req) == sharedKey {
			// An account key has every permission: the account refuses
			// the request as a whole.
			return " (the account refuses this client: its network rules, or shared key access disabled on the account)"
		}
		return " (" + needs + "; or the account's network rules refuse this client)"
	}
	return ""
}

// The credentials a request can carry, as Refused names them.
const (
	sharedKey = "the account key"
	sasToken  = "the SAS token"
	token     = "the Microsoft Entra token"
)

// credentialOf says which credential req carried; "" if it cannot tell.
func credentialOf(req *http.Request) string {
	if req == nil {
		return ""
	}
	auth := req.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(auth, "SharedKey"):
		return sharedKey
	case strings.HasPrefix(auth, "Bearer"):
		return token
	case req.URL != nil && req.URL.Query().Get("sig") != "":
		return sasToken
	}
	return ""
}

// Explain is what an error of a refused request should add to the
// service's code: Refused's reason if the credential itself was refused,
// and Hint's otherwise. resp is the service's answer, with its request;
// nil when there was none.
func Explain(op string, status int, code, message string, resp *http.Response) string {
	var req *http.Request
	if resp != nil {
		req = resp.Request
	}
	if r := Refused(status, code, message, resp); r != "" {
		return r
	}
	if code == "AuthorizationProtocolMismatch" && req != nil && req.URL != nil && req.URL.Query().Get("spr") == "https" {
		return " (the SAS token allows HTTPS only (spr=https) and the request went over " + req.URL.Scheme + ": an emulator answers HTTP, so sign its SAS for https,http)"
	}
	return Hint(op, status, code, req)
}

// Refused says, for a request whose credential the service did not accept
// at all (403 AuthenticationFailed; Azurite's blob service answers
// AuthorizationFailure, with the same message), which credential and what
// makes it refused, apart from a missing permission (see Hint); "" for any
// other answer. message is the service's error message; resp its answer,
// whose Date tells a SAS that has expired (or is not valid yet) by the
// service's clock from one that was signed wrong.
func Refused(status int, code, message string, resp *http.Response) string {
	if status != http.StatusForbidden {
		return ""
	}
	var req *http.Request
	if resp != nil {
		req = resp.Request
	}
	if code != "AuthenticationFailed" && !(code == "AuthorizationFailure" && strings.Contains(message, "failed to authenticate")) {
		return ""
	}
	const clock = "or this machine's clock is more than 15 minutes off the service's"
	switch credentialOf(req) {
	case sharedKey:
		return " (the signature was refused: the account key is wrong, " + clock + "; a key has every permission)"
	case sasToken:
		if why := sasTimes(req, resp); why != "" {
			return " (the SAS token was refused: " + why + ")"
		}
		return " (the SAS token was refused: it has expired or is not valid yet (its se and st), its signature does not match (another key signed it, or it was altered), " + clock + ")"
	case token:
		return " (the Microsoft Entra token was refused: it has expired, or is for another tenant or audience)"
	}
	return " (the credential was refused: a wrong key, an expired or altered SAS, " + clock + ")"
}

// sasTimes says whether a SAS token's times explain its refusal, judged on
// the service's clock (resp's Date): "it expired at …" or "it is not valid
// until …"; or, when the service's time is within them, that the
// signature is what was refused. "" when it cannot tell (no Date, times
// that do not parse).
func sasTimes(req *http.Request, resp *http.Response) string {
	if req == nil || req.URL == nil || resp == nil {
		return ""
	}
	now, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return ""
	}
	q := req.URL.Query()
	expiry, err := parseSASTime(q.Get("se"))
	if err != nil {
		return ""
	}
	if !now.Before(expiry) {
		return "it expired at " + expiry.UTC().Format(time.RFC3339) + " (its se), and the service's time is " + now.UTC().Format(time.RFC3339)
	}
	if st := q.Get("st"); st != "" {
		start, err := parseSASTime(st)
		if err != nil {
			return ""
		}
		if now.Before(start) {
			return "it is not valid until " + start.UTC().Format(time.RFC3339) + " (its st), and the service's time is " + now.UTC().Format(time.RFC3339)
		}
	}
	return "it is within its times (valid until " + expiry.UTC().Format(time.RFC3339) + " by its se), so its signature does not match: another key signed it, or it was altered"
}

// parseSASTime reads a SAS token's st or se: ISO 8601 in UTC, to the
// second, the minute or the day, as the service accepts them.
func parseSASTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a SAS time: %q", v)
}
