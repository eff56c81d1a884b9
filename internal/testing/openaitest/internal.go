package openaitest

import "net/http"

// InternalSecret is what an internal service (a cloud's metadata service,
// say) gives away to whoever reaches it; no status, event or log may ever
// show it.
const InternalSecret = "AccessKeyId=ASIAINTERNAL SecretAccessKey=internal-secret-value"

// Leak answers as such an internal service would to a request the
// operator should never have sent: 400, with InternalSecret in the API's
// error envelope, so a caller that copies error text copies the secret.
func Leak(w http.ResponseWriter, _ *http.Request) {
	WriteError(w, http.StatusBadRequest, "invalid_request_error", "internal", InternalSecret)
}
