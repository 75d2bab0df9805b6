"""
Validation of plmr's passes against the reference semantics of every level:
`check_each` runs a program before and after each pass on the same random inputs,
`fuzz` generates random valid programs and drives them through the compiler.
"""
