"""What an English word is when capitalization proves nothing: an ordinary word (SCOWL's common
words, english_words.txt.gz, with its licence in its header), an interjection or chat abbreviation,
a generic abbreviation (CD, USB, GMT), an adjective of nationality, language or faith, or a field
label of an e-mail or chat header. All general word lists: none names anything a text is about.

The Latin-script name finder (names.py) asks these where a capitalized word stands where any word
is capitalized (a sentence's or line's first word, a field's value) and where a line starts with a
label ("Time:", "Region:") that may be a field or a speaker.
"""

from __future__ import annotations

import errno
import gzip
import signal
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kbgraph.graph.extract.nlp.words import _FIRST_NAMES, _STOP

_WORDS_FILE = Path(__file__).with_name("english_words.txt.gz")
# the ordinary words SCOWL also lists capitalized as names (China, Turkey, Reading, Wells)
_PROPER_WORDS_FILE = Path(__file__).with_name("english_proper_words.txt.gz")

# interjections, greetings and chat abbreviations: a chat line starts with them ("Absolutely!", "Bye")
_INTERJECTIONS = frozenset("""
absolutely alright aha ahh ahem argh aw aww awesome bah bingo blah bravo brb btw bye byebye cheers cya damn
dang darn definitely doh duh eek eh er erm exactly fine fwiw gee gg gl golly gosh gotcha gr8 grr ha hah haha
hahaha heh hehe hey hi hiya hm hmm hmmm holla hooray howdy huh hurray idk iirc ikr imho imo indeed jeez k kk
lmao lmfao lol lolz meh mhm mm mmm nah nay nope np ok okay okie omg oof ooh oops ouch ow phew pls plz rofl
shh smh sorry sup sure tbh thanks thank thankyou thx totally ttyl ty ugh uh uhh um umm uhm whoa whoops woah
woo woohoo wow wtf xd yay yeah yeh yep yes yikes yo yup yum
hth afaik ymmv rtfm otoh ianal iow imnsho tia tyvm lmk wfh ooo nvm ftw irl
dunno gonna wanna gotta kinda sorta lemme gimme ya yah im ive dont cant wont didnt doesnt isnt wasnt arent
werent shouldnt wouldnt couldnt thats whats hows wheres theres heres youre theyre weve youve theyve tho
thru cuz coz cos anyhoo anyways methinks
afaics afaict grrr grrrr argh ie eg ta whoo woot yippee ahh ohh
""".split())
# greetings, thanks and yes/no of other languages a chat mixes in ("Merci", "Grazie", "Si"); in
# capitals they are acronyms ("SI" units)
_FOREIGN_INTERJECTIONS = frozenset("""
merci gracias danke bitte hola ciao bonjour bonsoir salut grazie prego oui si ja nein hallo moin servus hej
obrigado obrigada adios arrivederci tschüss salve vai
""".split())

# abbreviations of ordinary things (technology, units, time zones, business and mail words): written
# in capitals like names, but no one's name ("a 650M CD", "the PCMCIA card", "17:13 IST")
_GENERIC_ACRONYMS = frozenset("""
ac adsl ai aka am api ascii asap atm av bbs bios bps btw cad cc cd cdrom cd-rom cgi cli cmos cpu crt csv cvs
dc ddr dhcp diy dm dns doc dos dpi dsl dvd eod eta faq fm fps ftp fyi gb gcc gdp ghz gmt gnu gps gpu gui hd
hdd hdmi hq hr html http https hz id ide io ip ipv irc irq isa isdn iso isp it kb khz km lan lcd led lol
mb mbps mhz mp mpeg ms mtu na nb nfs nic nt ntfs ocr oem os osi pc pci pcmcia pda pdf php pin pnp pop pr
ps psu qa ram rfc rgb rom rpm rsvp rss sata scsi sdk sla sms smtp sql ssd ssh ssl sms tb tbd tcp tft tls
tv ui uk usa usb utc vat vga vip vm vpn wan wifi www xml
bst cest cet edt est gmt hkt ist jst mdt mst pdt pst utc
am pm ad bc bce ce
ppp pppoe pppoa l2tp ipsec voip sip snmp ldap nat vnc rdp smb cifs ntp imap pop3 mime uri url
wav wave riff mp3 mp4 jpg jpeg png gif tif tiff bmp avi mov mkv ogg flac aac zip rar tar gz tgz exe dll txt
rtf xls xlsx ppt pptx docx odt tex ps eps svg wi-fi
eof iso isos faq
cd-r cd-rw dvd-r dvd-rw dvd-ram eprom eeprom atx iso9660 udf ext2 ext3 ext4 fat32 vfat hfs lba mbr
dna rna hfc cfc ppm uv ceo cfo coo cto mla mep
""".split()) - {"uk", "usa", "gnu"}

# adjectives of nationality, language, people or faith: "French", "Frankish", "Catholic" are no
# entity of their own (the country, the people as a noun, "the Normans", are)
_NATIONALITIES = frozenset("""
african albanian algerian american andalusian anglo angolan arab arabic argentine argentinian armenian
asian assyrian australian austrian aztec babylonian balkan baltic bangladeshi basque bavarian belgian
bengali bolivian bosnian brazilian breton british bulgarian burmese byzantine cambodian canadian cantonese
carolingian catalan catholic caucasian celtic chilean chinese christian colombian congolese cornish
croatian cuban cypriot czech danish dutch egyptian english estonian ethiopian european filipino finnish
flemish frankish french gaelic galician georgian german germanic gothic greek haitian hawaiian hebrew
hellenic hindu hispanic hungarian icelandic indian indonesian iranian iraqi irish islamic israeli italian
jamaican japanese javanese jewish jordanian kenyan korean kurdish latin latvian lebanese libyan lithuanian
lombard macedonian malay malaysian maltese mandarin maori mediterranean mexican mongolian moorish moroccan
muslim neapolitan nepalese nigerian nordic norse norwegian ottoman pakistani palestinian persian peruvian
polish portuguese protestant prussian punjabi roman romanesque romanian russian saxon scandinavian scottish
serbian siamese sicilian slavic slovak slovenian somali spanish sudanese swedish swiss syrian taiwanese
tamil thai tibetan turkish ukrainian uzbek venetian vietnamese viking welsh western eastern northern southern
yiddish yugoslav zulu indigenous aboriginal
""".split())

# endings of adjectives of peoples and languages, for the parts of a compound after a nationality
# ("Roman-Gaulish", "Anglo-Frisian")
_ADJECTIVE_ENDINGS = ("ish", "ian", "ese", "ic", "an")  # "Anglo-Norman", "Norman-Irish"

# field labels of e-mail and chat headers and of exported records: structure, never a speaker
_HEADER_LABELS = frozenset("""
from to cc bcc date sent subject re fw fwd reply-to received time timestamp message-id organization
organisation attachment attachments importance priority participants channel room topic
""".split())


@lru_cache(maxsize=1)
def _common_words() -> frozenset[str]:
    with gzip.open(_WORDS_FILE, "rt", encoding="utf-8") as f:
        return frozenset(line.strip() for line in f if line.strip() and not line.startswith("#"))


@lru_cache(maxsize=1)
def _proper_words() -> frozenset[str]:
    with gzip.open(_PROPER_WORDS_FILE, "rt", encoding="utf-8") as f:
        return frozenset(line.strip() for line in f if line.strip() and not line.startswith("#"))


def _bare(word: str) -> str:
    """A word as the lists hold it: lower case, without a final dot or a possessive "'s"."""
    low = word.lower().rstrip(".")
    return low[:-2] if low.endswith(("'s", "’s")) else low


def plain_word(word: str) -> bool:
    """An ordinary word that names nothing when capitalized ("Representatives", "Terror", "NULL",
    "URGENT"): ordinary (``ordinary_word``) and not also a name in SCOWL's lists (China, Turkey,
    Reading and Wells are both)."""
    return ordinary_word(word) and _bare(word) not in _proper_words()


def ordinary_word(word: str) -> bool:
    """An ordinary English word or interjection ("Absolutely", "Keep", "Region", "Bye"), not a
    common given name ("Mark", "Bill", "Rose" name people as often as things)."""
    low = _bare(word)
    if low in _FIRST_NAMES:
        return False
    words = _common_words()
    # an adjective in -al made a plural noun, which the list leaves out ("Industrials", "Financials",
    # "Rentals"); any plural of a listed word would be too many (Hastings: "hasting")
    return low in _STOP or low in _INTERJECTIONS or low in words or _foreign_interjection(word) \
        or (len(low) > 5 and low.endswith("als") and low[:-1] in words)


# the share of the Census's people (in percent) a given name needs: the rarer ones are as often
# words of other names ("Hong" of Hong Kong, "Easter", "Warner", "Tai" are all listed under 0.01)
_CENSUS_MIN_PERCENT = 0.01


@lru_cache(maxsize=1)
def _census_given_names() -> frozenset[str]:
    """The given names of the 1990 US Census (as the ``names`` package ships them: name, percent of
    people, cumulative percent, rank) borne by at least ``_CENSUS_MIN_PERCENT`` of them (1,555),
    less those that are ordinary words too ("Will", "June", "Grant") or a nationality: 1,450. A
    word of these lists before a surname says a person where nothing else in the text does ("Sandra
    Bullock starred")."""
    package = resources.files("names")
    found: set[str] = set()
    for part in ("dist.male.first", "dist.female.first"):
        for line in package.joinpath(part).read_text(encoding="ascii").splitlines():
            fields = line.split()
            if len(fields) < 2 or float(fields[1]) < _CENSUS_MIN_PERCENT:
                continue
            name = fields[0].lower()
            if len(name) >= 2 and not ordinary_word(name) and not nationality_word(name):
                found.add(name)
    return frozenset(found)


def given_name(word: str) -> bool:
    """A given name: one of the hand list (which keeps "Mark", "Bill", "Rose", ordinary words too)
    or a common one of the Census's (``_census_given_names``)."""
    low = word.lower()
    return low in _FIRST_NAMES or low in _census_given_names()


def _foreign_interjection(word: str) -> bool:
    return not word.isupper() and word.lower() in _FOREIGN_INTERJECTIONS


def interjection(word: str) -> bool:
    """An interjection or chat abbreviation ("Lol", "Im", "Brb", "Merci"), wherever it stands."""
    return (word.lower().replace("’", "'") in _INTERJECTIONS or _foreign_interjection(word)) \
        and word.lower() not in _FIRST_NAMES


@lru_cache(maxsize=1)
def _system_codes() -> frozenset[str]:
    """The names of POSIX signals and error numbers ("SIGHUP", "EPIPE"), as Python's own modules
    list them: a program's output in a mail or a chat names no organization."""
    return frozenset(s.name.lower() for s in signal.Signals) | frozenset(n.lower() for n in errno.errorcode.values())


def generic_acronym(word: str) -> bool:
    """An abbreviation of an ordinary thing ("CD", "PCMCIA", "GMT"), however it is written, also in
    the plural ("CDs", "FAQs")."""
    low = word.lower().rstrip(".")
    if low in _GENERIC_ACRONYMS or (word.isupper() and low in _system_codes()):
        return True
    return len(word) >= 3 and word.endswith("s") and word[:-1].isupper() and low[:-1] in _GENERIC_ACRONYMS


def nationality_word(word: str) -> bool:
    """An adjective of nationality, language, people or faith ("French", "Frankish", "Catholic"),
    also in a hyphenated compound whose every part is one, an ordinary word or an adjective of that
    kind ("Roman-Gaulish", "Carolingian-based")."""
    parts = [p for p in word.lower().replace("’", "'").split("-") if p]
    if not parts or not any(p in _NATIONALITIES for p in parts):
        return False
    return all(p in _NATIONALITIES or p in _common_words() or p.endswith(_ADJECTIVE_ENDINGS) for p in parts)


def header_label(label: str) -> bool:
    """A field label of a mail or chat header ("From", "Date", "Subject", "Time")."""
    return label.strip().lower() in _HEADER_LABELS
