package wire

// ItemsMagic is the first line of every payload blob, before its frames
// (one per item: a length line, then the item's text). It is not a queue
// text's: a blob is read only through a pointer (see [Pointer]), and its
// frames are package payload's to write and read. It is here so that every
// prefix azdispatch writes is defined in one package.
const ItemsMagic = "azdispatch-items/1\n"
