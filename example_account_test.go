package azdispatch_test

import (
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azdispatch/azdispatch"
)

// NewAccount takes any Microsoft Entra ID credential: a managed identity in
// Azure, the developer's Azure CLI login on a laptop.
func ExampleNewAccount() {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	account, err := azdispatch.NewAccount("https://myaccount.queue.core.windows.net/", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	queue, err := account.Queue("orders")
	if err != nil {
		log.Fatal(err)
	}
	_ = queue // use it as in the package example
}
