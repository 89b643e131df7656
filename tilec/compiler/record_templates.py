"""The bodies of the constructors `records.frozen` and `records.mutable` give
their classes: `init<n>` stores its `n` arguments a0, a1, ... through the
functions s0, s1, ... (`records` makes a copy of it per class, with those
names bound to the class's slots and the arguments renamed to its fields).

They are written out, not generated, so that defining a record compiles
nothing: compiling even these few lines costs about as much as the rest of
a class's definition, once per class or per number of fields in every
process (the names s0, s1, ... are globals of each copy, not of this
module).  A record with more fields than the last one here is refused at
its definition (add the next)."""


def init0(self):
    pass


def init1(self, a0):
    s0(self, a0)


def init2(self, a0, a1):
    s0(self, a0); s1(self, a1)


def init3(self, a0, a1, a2):
    s0(self, a0); s1(self, a1); s2(self, a2)


def init4(self, a0, a1, a2, a3):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3)


def init5(self, a0, a1, a2, a3, a4):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4)


def init6(self, a0, a1, a2, a3, a4, a5):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)


def init7(self, a0, a1, a2, a3, a4, a5, a6):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6)


def init8(self, a0, a1, a2, a3, a4, a5, a6, a7):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7)


def init9(self, a0, a1, a2, a3, a4, a5, a6, a7, a8):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8)


def init10(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9)


def init11(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10)


def init12(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)


def init13(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12)


def init14(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13)


def init15(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14)


def init16(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14); s15(self, a15)


def init17(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14); s15(self, a15); s16(self, a16)


def init18(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14); s15(self, a15); s16(self, a16); s17(self, a17)


def init19(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14); s15(self, a15); s16(self, a16); s17(self, a17)
    s18(self, a18)


def init20(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19):
    s0(self, a0); s1(self, a1); s2(self, a2); s3(self, a3); s4(self, a4); s5(self, a5)
    s6(self, a6); s7(self, a7); s8(self, a8); s9(self, a9); s10(self, a10); s11(self, a11)
    s12(self, a12); s13(self, a13); s14(self, a14); s15(self, a15); s16(self, a16); s17(self, a17)
    s18(self, a18); s19(self, a19)
