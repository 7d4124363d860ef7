// Package connstr says what is wrong with an Azure Storage connection
// string, without ever quoting a value from it: a key or a signature is a
// secret, and the string is usually one.
package connstr

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Diagnose returns why the Azure SDK would refuse cs, or "" if nothing is
// found wrong. It names the settings that are there or missing, never a
// value.
func Diagnose(cs string) string {
	cs = strings.TrimSpace(cs)
	if cs == "" {
		return "it is empty"
	}
	if len(cs) >= 2 && (cs[0] == '"' || cs[0] == '\'') && cs[len(cs)-1] == cs[0] {
		return "it is wrapped in quotes, as a shell or a .env file would write it: give it without them"
	}
	settings := map[string]string{}
	var bad int
	for part := range strings.SplitSeq(cs, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			bad++
			continue
		}
		settings[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if len(settings) == 0 {
		return "it is not Name=value settings separated by semicolons (AccountName=…;AccountKey=…;…)"
	}
	if bad > 0 {
		if bad == 1 {
			return "one of its parts (between semicolons) is not Name=value"
		}
		return fmt.Sprintf("%d of its parts (between semicolons) are not Name=value", bad)
	}
	name, hasName := settings["accountname"]
	key, hasKey := settings["accountkey"]
	_, hasSAS := settings["sharedaccesssignature"]
	switch {
	case hasKey && hasSAS:
		return "it has both AccountKey and SharedAccessSignature: give one"
	case hasKey && !hasName:
		return "it has an AccountKey but no AccountName"
	case hasKey && name == "":
		return "its AccountName is empty"
	case hasKey && key == "":
		return "its AccountKey is empty"
	case hasKey:
		if _, err := base64.StdEncoding.DecodeString(key); err != nil {
			return "its AccountKey is not base64 (the key as the portal shows it, ending in ==, with nothing cut off)"
		}
	case hasSAS && settings["sharedaccesssignature"] == "":
		return "its SharedAccessSignature is empty"
	case !hasSAS:
		return "it has neither AccountName with AccountKey, nor SharedAccessSignature"
	}
	_, queueEndpoint := settings["queueendpoint"]
	if !queueEndpoint && !hasName {
		return "it names no account: AccountName, or a QueueEndpoint, is needed to find the queue service"
	}
	return ""
}
