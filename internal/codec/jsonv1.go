//go:build !goexperiment.jsonv2

package codec

// jsonV2 tells whether encoding/json runs on encoding/json/v2
// (GOEXPERIMENT=jsonv2). It does not in this build.
const jsonV2 = false
