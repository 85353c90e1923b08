//! Strings in ICU root collation order: [`compare_strings`] and the collation elements it
//! compares, which [`crate::string_sort_key`] also turns into bytes.

use std::cmp::Ordering;
use std::sync::OnceLock;

/// Strings in the order of ICU's root collator at its default (tertiary) strength, which
/// CouchDB uses: first by base letters ignoring case and accents, then by accents, then by case
/// with lowercase first; characters such as U+200B count for nothing. Symbols sort before
/// digits, digits before letters: `"_" < "-" < "," < "~" < "$" < "0" < "a" < "A" < "á" < "b"`.
///
/// The full Unicode tables are approximated with a few rules, which agree with ICU 72 on every
/// pair in a differential test of random strings over ASCII, Latin-1, Latin Extended-A, the
/// accented letters of Latin Extended-B and Extended Additional (decomposed into a base letter
/// and accents), whitespace and ignorable characters. Elsewhere the order is approximate: other
/// Latin Extended-B letters and other scripts sort after `z` by lowercase code point, and
/// symbols outside Latin-1 between the Latin-1 symbols and the currency signs by code point.
pub fn compare_strings(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (x, y) = (collation_elements(a), collation_elements(b));
    fn primaries(elements: &[Element]) -> impl Iterator<Item = u32> + '_ {
        elements.iter().map(|e| e.primary).filter(|&p| p != 0)
    }
    primaries(&x)
        .cmp(primaries(&y))
        .then_with(|| {
            x.iter()
                .map(|e| e.secondary)
                .cmp(y.iter().map(|e| e.secondary))
        })
        .then_with(|| {
            x.iter()
                .map(|e| e.tertiary)
                .cmp(y.iter().map(|e| e.tertiary))
        })
}

/// One collation element: `primary` tells letters apart (0 for an accent), `secondary` accents
/// (`COMMON` for none), `tertiary` case and variants (`LOWER` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Element {
    pub primary: u32,
    pub secondary: u16,
    pub tertiary: u8,
}

pub(crate) const COMMON: u16 = 1;
pub(crate) const LOWER: u8 = 1;
const UPPER: u8 = 2;
/// The tertiary weight of a variant form: `ß` of `ss`, `ª` of `a`, a no-break space of a space.
const VARIANT: u8 = 3;
const UPPER_VARIANT: u8 = 4;
/// The secondary weight of the middle dot in `ŀ`, above every combining accent's.
const MIDDLE_DOT: u16 = u16::MAX - 3;
/// The secondary weight that sets `ð` apart from `d`, above [`MIDDLE_DOT`].
const ETH: u16 = u16::MAX - 2;
/// The secondary weight inside `æ`, `œ` and `ß`, above [`ETH`].
const LIGATURE: u16 = u16::MAX - 1;
/// The secondary weight of the long s `ſ`, above [`LIGATURE`].
const LONG_S: u16 = u16::MAX;

// Primary weight ranges, in ICU's order of groups.
const WHITESPACE_BASE: u32 = 0x10;
const SYMBOL_BASE: u32 = 0x100;
const OTHER_SYMBOL_BASE: u32 = 0x1000;
const CURRENCY_BASE: u32 = 0x12_0000;
const DIGIT_BASE: u32 = 0x20_0000;
const OTHER_DIGIT_BASE: u32 = 0x20_0100;
const LATIN_BASE: u32 = 0x40_0000;
const OTHER_LETTER_BASE: u32 = 0x50_0000;

/// The whitespace characters that have their own primary weight, in order; others are
/// variants of the space.
const WHITESPACE_ORDER: &str = "\t\n\u{b}\u{c}\r\u{85}";
/// ASCII and Latin-1 punctuation and symbols in ICU root order, currency signs excepted.
const SYMBOL_ORDER: &str = "_-,;:!¡?¿.·'\"«»()[]{}§¶@*/\\&#%`´^¯¨¸°©®+±÷×<=>¬|¦~";
const CURRENCY_ORDER: &str = "¤¢$£¥";
/// Combining accents in ICU root secondary order; canonical duplicates (U+0340 for U+0300, ...)
/// are mapped before lookup. Accents not listed sort after these.
const ACCENT_ORDER: &[u16] = &[
    0x332, 0x313, 0x314, 0x301, 0x300, 0x306, 0x302, 0x30C, 0x30A, 0x342, 0x308, 0x344, 0x30B,
    0x303, 0x307, 0x338, 0x327, 0x328, 0x304, 0x30D, 0x30E, 0x312, 0x315, 0x31A, 0x33D, 0x33E,
    0x33F, 0x346, 0x34A, 0x34B, 0x34C, 0x350, 0x351, 0x352, 0x357, 0x35B, 0x35D, 0x35E, 0x316,
    0x317, 0x318, 0x319, 0x31C, 0x31D, 0x31E, 0x31F, 0x320, 0x329, 0x32A, 0x32B, 0x32C, 0x32F,
    0x333, 0x33A, 0x33B, 0x33C, 0x347, 0x348, 0x349, 0x34D, 0x34E, 0x353, 0x354, 0x355, 0x356,
    0x359, 0x35A, 0x35C, 0x35F, 0x362, 0x336, 0x337, 0x335, 0x305, 0x309, 0x30F, 0x310, 0x311,
    0x31B, 0x321, 0x322, 0x323, 0x324, 0x325, 0x326, 0x32D, 0x32E, 0x330, 0x331, 0x334, 0x339,
    0x345, 0x358, 0x360, 0x361, 0x363, 0x368, 0x369, 0x364, 0x36A, 0x365, 0x36B, 0x366, 0x36C,
    0x36D, 0x367, 0x36E, 0x36F,
];
/// Letter codes for the accents in [`LATIN_DECOMPOSITIONS`].
#[rustfmt::skip]
const ACCENT_CODES: &[(char, u16)] = &[
    ('g', 0x300), ('a', 0x301), ('c', 0x302), ('t', 0x303), ('m', 0x304), ('b', 0x306),
    ('o', 0x307), ('d', 0x308), ('k', 0x309), ('r', 0x30A), ('h', 0x30B), ('v', 0x30C),
    ('G', 0x30F), ('B', 0x311), ('H', 0x31B), ('u', 0x323), ('D', 0x324), ('R', 0x325),
    (',', 0x326), ('s', 0x327), ('q', 0x328), ('C', 0x32D), ('W', 0x32E), ('T', 0x330),
    ('M', 0x331),
];
/// Accented Latin letters as `<letter><base letter><accent codes>`, generated from the canonical
/// decompositions in the Unicode Character Database for U+00C0..U+024F and U+1E00..U+1EFF.
/// Example: `ấac` is `a` + circumflex + acute. Bases are ASCII letters, `æ` or `ø`.
const LATIN_DECOMPOSITIONS: &str =
    "ÀAg ÁAa ÂAc ÃAt ÄAd ÅAr ÇCs ÈEg ÉEa ÊEc ËEd ÌIg ÍIa ÎIc ÏId ÑNt ÒOg ÓOa ÔOc ÕOt ÖOd ÙUg  \
     ÚUa ÛUc ÜUd ÝYa àag áaa âac ãat äad åar çcs èeg éea êec ëed ìig íia îic ïid ñnt òog óoa  \
     ôoc õot öod ùug úua ûuc üud ýya ÿyd ĀAm āam ĂAb ăab ĄAq ąaq ĆCa ćca ĈCc ĉcc ĊCo ċco ČCv  \
     čcv ĎDv ďdv ĒEm ēem ĔEb ĕeb ĖEo ėeo ĘEq ęeq ĚEv ěev ĜGc ĝgc ĞGb ğgb ĠGo ġgo ĢGs ģgs ĤHc  \
     ĥhc ĨIt ĩit ĪIm īim ĬIb ĭib ĮIq įiq İIo ĴJc ĵjc ĶKs ķks ĹLa ĺla ĻLs ļls ĽLv ľlv ŃNa ńna  \
     ŅNs ņns ŇNv ňnv ŌOm ōom ŎOb ŏob ŐOh őoh ŔRa ŕra ŖRs ŗrs ŘRv řrv ŚSa śsa ŜSc ŝsc ŞSs şss  \
     ŠSv šsv ŢTs ţts ŤTv ťtv ŨUt ũut ŪUm ūum ŬUb ŭub ŮUr ůur ŰUh űuh ŲUq ųuq ŴWc ŵwc ŶYc ŷyc  \
     ŸYd ŹZa źza ŻZo żzo ŽZv žzv ƠOH ơoH ƯUH ưuH ǍAv ǎav ǏIv ǐiv ǑOv ǒov ǓUv ǔuv ǕUdm ǖudm  \
     ǗUda ǘuda ǙUdv ǚudv ǛUdg ǜudg ǞAdm ǟadm ǠAom ǡaom ǢÆm ǣæm ǦGv ǧgv ǨKv ǩkv ǪOq ǫoq ǬOqm  \
     ǭoqm ǰjv ǴGa ǵga ǸNg ǹng ǺAra ǻara ǼÆa ǽæa ǾØa ǿøa ȀAG ȁaG ȂAB ȃaB ȄEG ȅeG ȆEB ȇeB ȈIG  \
     ȉiG ȊIB ȋiB ȌOG ȍoG ȎOB ȏoB ȐRG ȑrG ȒRB ȓrB ȔUG ȕuG ȖUB ȗuB ȘS, șs, ȚT, țt, ȞHv ȟhv ȦAo  \
     ȧao ȨEs ȩes ȪOdm ȫodm ȬOtm ȭotm ȮOo ȯoo ȰOom ȱoom ȲYm ȳym ḀAR ḁaR ḂBo ḃbo ḄBu ḅbu ḆBM  \
     ḇbM ḈCsa ḉcsa ḊDo ḋdo ḌDu ḍdu ḎDM ḏdM ḐDs ḑds ḒDC ḓdC ḔEmg ḕemg ḖEma ḗema ḘEC ḙeC ḚET  \
     ḛeT ḜEsb ḝesb ḞFo ḟfo ḠGm ḡgm ḢHo ḣho ḤHu ḥhu ḦHd ḧhd ḨHs ḩhs ḪHW ḫhW ḬIT ḭiT ḮIda ḯida  \
     ḰKa ḱka ḲKu ḳku ḴKM ḵkM ḶLu ḷlu ḸLum ḹlum ḺLM ḻlM ḼLC ḽlC ḾMa ḿma ṀMo ṁmo ṂMu ṃmu ṄNo  \
     ṅno ṆNu ṇnu ṈNM ṉnM ṊNC ṋnC ṌOta ṍota ṎOtd ṏotd ṐOmg ṑomg ṒOma ṓoma ṔPa ṕpa ṖPo ṗpo ṘRo  \
     ṙro ṚRu ṛru ṜRum ṝrum ṞRM ṟrM ṠSo ṡso ṢSu ṣsu ṤSao ṥsao ṦSvo ṧsvo ṨSuo ṩsuo ṪTo ṫto ṬTu  \
     ṭtu ṮTM ṯtM ṰTC ṱtC ṲUD ṳuD ṴUT ṵuT ṶUC ṷuC ṸUta ṹuta ṺUmd ṻumd ṼVt ṽvt ṾVu ṿvu ẀWg ẁwg  \
     ẂWa ẃwa ẄWd ẅwd ẆWo ẇwo ẈWu ẉwu ẊXo ẋxo ẌXd ẍxd ẎYo ẏyo ẐZc ẑzc ẒZu ẓzu ẔZM ẕzM ẖhM ẗtd  \
     ẘwr ẙyr ẠAu ạau ẢAk ảak ẤAca ấaca ẦAcg ầacg ẨAck ẩack ẪAct ẫact ẬAuc ậauc ẮAba ắaba ẰAbg  \
     ằabg ẲAbk ẳabk ẴAbt ẵabt ẶAub ặaub ẸEu ẹeu ẺEk ẻek ẼEt ẽet ẾEca ếeca ỀEcg ềecg ỂEck ểeck  \
     ỄEct ễect ỆEuc ệeuc ỈIk ỉik ỊIu ịiu ỌOu ọou ỎOk ỏok ỐOca ốoca ỒOcg ồocg ỔOck ổock ỖOct  \
     ỗoct ỘOuc ộouc ỚOHa ớoHa ỜOHg ờoHg ỞOHk ởoHk ỠOHt ỡoHt ỢOHu ợoHu ỤUu ụuu ỦUk ủuk ỨUHa  \
     ứuHa ỪUHg ừuHg ỬUHk ửuHk ỮUHt ữuHt ỰUHu ựuHu ỲYg ỳyg ỴYu ỵyu ỶYk ỷyk ỸYt ỹyt";

pub(crate) fn collation_elements(s: &str) -> Vec<Element> {
    let mut elements = Vec::with_capacity(s.len());
    for c in s.chars() {
        push_elements(c, &mut elements);
    }
    elements
}

fn push_elements(c: char, out: &mut Vec<Element>) {
    let letter = |primary: u32, tertiary: u8| Element {
        primary,
        secondary: COMMON,
        tertiary,
    };
    let case = |c: char| if c.is_uppercase() { UPPER } else { LOWER };
    let cp = c as u32;
    if c.is_ascii_alphabetic() {
        out.push(letter(latin_primary(c), case(c)));
    } else if let Some(digit) = c.to_digit(10) {
        out.push(letter(DIGIT_BASE + digit, LOWER));
    } else if let Some(i) = WHITESPACE_ORDER.chars().position(|w| w == c) {
        out.push(letter(WHITESPACE_BASE + i as u32, LOWER));
    } else if c == ' ' {
        out.push(letter(WHITESPACE_BASE + 0x10, LOWER));
    } else if let Some(i) = SYMBOL_ORDER.chars().position(|s| s == c) {
        out.push(letter(SYMBOL_BASE + i as u32, LOWER));
    } else if let Some(i) = CURRENCY_ORDER.chars().position(|s| s == c) {
        out.push(letter(CURRENCY_BASE + i as u32, LOWER));
    } else if is_ignorable(c) {
        // Contributes nothing at any level.
    } else if let Some(weight) = accent_weight(c) {
        out.push(Element {
            primary: 0,
            secondary: weight,
            tertiary: LOWER,
        });
    } else if let Some((base, accents)) = latin_decomposition(c) {
        push_elements(base, out);
        for accent in accents.chars() {
            if let Some(&(_, mark)) = ACCENT_CODES.iter().find(|(code, _)| *code == accent) {
                push_elements(char::from_u32(u32::from(mark)).unwrap_or(' '), out);
            }
        }
    } else if let Some(special) = special_latin(c) {
        push_special_latin(special, out);
    } else {
        out.push(if c.is_whitespace() {
            letter(WHITESPACE_BASE + 0x10, VARIANT)
        } else if (0x20A0..=0x20CF).contains(&cp) {
            letter(CURRENCY_BASE + 0x100 + cp, LOWER)
        } else if let Some(digit) = decimal_digit(cp) {
            letter(
                DIGIT_BASE + digit,
                if cp >= 0xFF10 { VARIANT } else { LOWER },
            )
        } else if c.is_numeric() {
            letter(OTHER_DIGIT_BASE + cp, LOWER)
        } else if c.is_alphabetic() {
            // ICU sorts the micro sign as the Greek letter mu.
            let lower = if c == 'µ' {
                'μ'
            } else {
                c.to_lowercase().next().unwrap_or(c)
            };
            letter(OTHER_LETTER_BASE + lower as u32, case(c))
        } else {
            letter(OTHER_SYMBOL_BASE + cp, LOWER)
        });
    }
}

/// Each ASCII letter owns four primary weights, so that letters ICU sorts after it (`ŋ` after
/// `n`, `þ` after `z`) fit between.
fn latin_primary(base: char) -> u32 {
    let index = u32::from(base.to_ascii_lowercase()).saturating_sub(u32::from('a'));
    LATIN_BASE + index * 4
}

/// How a Latin letter without a canonical decomposition collates.
enum SpecialLatin {
    /// Several base letters with a variant tertiary weight: `ĳ` is `ij`.
    Expansion(&'static str, u8),
    /// Two base letters joined by a secondary weight above every accent: `æ` is `a` `e`, `ß` is
    /// `s` `s`, so `"ae" < "AE" < "æ"` and `"aé" < "æ"`.
    Ligature(char, char, u8),
    /// A base letter followed by a secondary weight: `ø` is `o` with a stroke, `ſ` is `s` with
    /// a weight above `ß`'s.
    Marked(char, u8, u16),
    /// A letter of its own, sorted right after a base letter: `ŋ` after `n`.
    After(char, u32, u8),
    /// A variant of a digit: `²`.
    Digit(u32),
}

fn special_latin(c: char) -> Option<SpecialLatin> {
    use SpecialLatin::*;
    // ICU weighs the stroke of `đ`, `ħ` and `ł` like U+0335, the slash of `ø` like U+0338.
    let stroke = accent_weight('\u{335}').unwrap_or(MIDDLE_DOT);
    let slash = accent_weight('\u{338}').unwrap_or(MIDDLE_DOT);
    Some(match c {
        'æ' => Ligature('a', 'e', VARIANT),
        'Æ' => Ligature('a', 'e', UPPER_VARIANT),
        'œ' => Ligature('o', 'e', VARIANT),
        'Œ' => Ligature('o', 'e', UPPER_VARIANT),
        'ß' => Ligature('s', 's', VARIANT),
        'ẞ' => Ligature('s', 's', UPPER_VARIANT),
        'ĳ' => Expansion("ij", VARIANT),
        'Ĳ' => Expansion("ij", UPPER_VARIANT),
        'ſ' => Marked('s', VARIANT, LONG_S),
        'ª' => Expansion("a", VARIANT),
        'º' => Expansion("o", VARIANT),
        'đ' => Marked('d', LOWER, stroke),
        'Đ' => Marked('d', UPPER, stroke),
        'ð' => Marked('d', LOWER, ETH),
        'Ð' => Marked('d', UPPER, ETH),
        'ħ' => Marked('h', LOWER, stroke),
        'Ħ' => Marked('h', UPPER, stroke),
        'ł' => Marked('l', LOWER, stroke),
        'Ł' => Marked('l', UPPER, stroke),
        'ŀ' => Marked('l', LOWER, MIDDLE_DOT),
        'Ŀ' => Marked('l', UPPER, MIDDLE_DOT),
        'ø' => Marked('o', LOWER, slash),
        'Ø' => Marked('o', UPPER, slash),
        'ı' => After('i', 1, LOWER),
        'ƒ' => After('f', 1, LOWER),
        'Ƒ' => After('f', 1, UPPER),
        'ŋ' => After('n', 1, LOWER),
        'Ŋ' => After('n', 1, UPPER),
        'ĸ' => After('q', 1, LOWER),
        'ŧ' => After('t', 1, LOWER),
        'Ŧ' => After('t', 1, UPPER),
        'þ' => After('z', 2, LOWER),
        'Þ' => After('z', 2, UPPER),
        '¹' => Digit(1),
        '²' => Digit(2),
        '³' => Digit(3),
        _ => return None,
    })
}

fn push_special_latin(special: SpecialLatin, out: &mut Vec<Element>) {
    let element = |primary: u32, tertiary: u8| Element {
        primary,
        secondary: COMMON,
        tertiary,
    };
    match special {
        SpecialLatin::Expansion(bases, tertiary) => {
            out.extend(bases.chars().map(|b| element(latin_primary(b), tertiary)));
        }
        SpecialLatin::Ligature(first, second, tertiary) => {
            out.push(element(latin_primary(first), tertiary));
            out.push(Element {
                primary: 0,
                secondary: LIGATURE,
                tertiary,
            });
            out.push(element(latin_primary(second), tertiary));
        }
        SpecialLatin::Marked(base, tertiary, secondary) => {
            out.push(element(latin_primary(base), tertiary));
            out.push(Element {
                primary: 0,
                secondary,
                tertiary: LOWER,
            });
        }
        SpecialLatin::After(base, offset, tertiary) => {
            out.push(element(latin_primary(base) + offset, tertiary));
        }
        SpecialLatin::Digit(digit) => out.push(element(DIGIT_BASE + digit, VARIANT)),
    }
}

/// The value of a decimal digit of another script (`٣` is 3), which ICU sorts as that digit.
fn decimal_digit(cp: u32) -> Option<u32> {
    const ZEROS: &[u32] = &[
        0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xE50,
        0xED0, 0xF20, 0x1040, 0x17E0, 0x1810, 0xFF10,
    ];
    ZEROS
        .iter()
        .find(|&&zero| (zero..zero + 10).contains(&cp))
        .map(|zero| cp - zero)
}

/// Controls (other than whitespace) and invisible format characters, which ICU ignores.
fn is_ignorable(c: char) -> bool {
    let cp = c as u32;
    (c.is_control() && !c.is_whitespace())
        || matches!(cp, 0xAD | 0x34F | 0x61C | 0x180E | 0xFEFF)
        || (0x200B..=0x200F).contains(&cp)
        || (0x202A..=0x202E).contains(&cp)
        || (0x2060..=0x206F).contains(&cp)
        || (0xFE00..=0xFE0F).contains(&cp)
        || (0xE0000..=0xE0FFF).contains(&cp)
}

/// The secondary weight of a combining accent, `None` for any other character.
fn accent_weight(c: char) -> Option<u16> {
    let cp = match c as u32 {
        0x340 => 0x300,
        0x341 => 0x301,
        0x343 => 0x313,
        cp => cp,
    };
    let is_accent = (0x300..=0x36F).contains(&cp)
        || (0x1AB0..=0x1AFF).contains(&cp)
        || (0x1DC0..=0x1DFF).contains(&cp)
        || (0x20D0..=0x20FF).contains(&cp)
        || (0xFE20..=0xFE2F).contains(&cp);
    if !is_accent {
        return None;
    }
    let listed = ACCENT_ORDER.iter().position(|&a| u32::from(a) == cp);
    let rank = match listed {
        Some(i) => i as u32,
        None => ACCENT_ORDER.len() as u32 + (cp - 0x300),
    };
    Some(
        COMMON
            + 1
            + u16::try_from(rank)
                .unwrap_or(MIDDLE_DOT - 3)
                .min(MIDDLE_DOT - 3),
    )
}

/// The base letter and accent codes of an accented Latin letter.
fn latin_decomposition(c: char) -> Option<(char, &'static str)> {
    static TABLE: OnceLock<Vec<(char, char, &'static str)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table: Vec<(char, char, &'static str)> = LATIN_DECOMPOSITIONS
            .split_whitespace()
            .filter_map(|token| {
                let mut chars = token.char_indices();
                let (_, letter) = chars.next()?;
                let (_, base) = chars.next()?;
                let (accents_at, _) = chars.next()?;
                Some((letter, base, &token[accents_at..]))
            })
            .collect();
        table.sort_by_key(|&(letter, _, _)| letter);
        table
    });
    let i = table
        .binary_search_by_key(&c, |&(letter, _, _)| letter)
        .ok()?;
    table.get(i).map(|&(_, base, accents)| (base, accents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_decomposition_table_is_well_formed() {
        let tokens: Vec<&str> = LATIN_DECOMPOSITIONS.split_whitespace().collect();
        assert_eq!(tokens.len(), 494);
        for token in tokens {
            let mut chars = token.chars();
            let letter = chars.next().expect("letter");
            let base = chars.next().expect("base");
            assert!(
                base.is_ascii_alphabetic() || "æÆøØ".contains(base),
                "{token}"
            );
            let accents = chars.as_str();
            assert!(!accents.is_empty(), "{token}");
            for code in accents.chars() {
                assert!(ACCENT_CODES.iter().any(|(c, _)| *c == code), "{token}");
            }
            assert_eq!(
                latin_decomposition(letter),
                Some((base, accents)),
                "{token}"
            );
        }
    }
}
