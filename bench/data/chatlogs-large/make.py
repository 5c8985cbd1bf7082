"""Writes corpus.jsonl and questions.jsonl of the chatlogs-large evaluation set (see README.md).

    python bench/data/chatlogs-large/make.py

Chat logs of an invented events-and-software agency, Fernwick & Rowe: channels and direct messages,
one `Handle: message` per line. The office manager, Priya Nandakumar, speaks in most logs and the
operations lead, Theo Marsh, in many (the hubs). Every person, venue, band, firm and project is
invented. The logs come from conversation templates with several wordings each, filled from one fact
sheet per person, event and project, plus hand-written small talk on recurring topics (the coffee
machine, the printer, parking); so every question's gold logs are known by construction. A check
refuses to write the set when an answer is missing from its gold logs or when a log outside the gold
holds both the answer and the question's anchor.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
rng = random.Random(1126)
NARRATOR = "PriyaNandakumar"
OPS = "TheoMarsh"


@dataclass
class Person:
    first: str
    last: str
    role: str
    band: str
    food: str
    pet: str  # "a cat called Biscuit"
    pet_name: str
    hometown: str
    hobby: str
    manager: str = ""

    @property
    def handle(self) -> str:
        return self.first + self.last

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


PEOPLE = [
    Person("Lena", "Okafor", "designer", "Velvet Harbour", "jollof rice", "a cat", "Biscuit", "Leeds", "bouldering"),
    Person("Marcus", "Feld", "backend developer", "Copper Lanterns", "ramen", "a greyhound", "Pilot", "Rotterdam", "sailing"),
    Person("Aiko", "Brennan", "project manager", "The Quiet Magpies", "bibimbap", "two rabbits", "Mochi and Bean", "Cork", "pottery"),
    Person("Tobias", "Wren", "frontend developer", "Saltwater Choir", "pierogi", "a tortoise", "Gerald", "Gdansk", "chess"),
    Person("Nadia", "Haddad", "event producer", "Neon Orchard", "mansaf", "a parrot", "Captain", "Amman", "salsa dancing"),
    Person("Felix", "Amsel", "sound engineer", "Glass Foxes", "schnitzel", "a dachshund", "Strudel", "Graz", "trail running"),
    Person("Rosa", "Quintero", "account manager", "The Tidewalkers", "arepas", "a cat", "Luna", "Medellin", "salsa cooking"),
    Person("Jonah", "Pike", "data analyst", "Midnight Allotment", "fish pie", "a collie", "Bramble", "Whitby", "birdwatching"),
    Person("Mei", "Tanaka", "QA engineer", "Brass Meridian", "okonomiyaki", "a hamster", "Dumpling", "Osaka", "calligraphy"),
    Person("Samir", "Kaur", "DevOps engineer", "Little Cedar", "chole bhature", "a beagle", "Mango", "Amritsar", "cricket"),
    Person("Greta", "Lindholm", "copywriter", "Hollow Moons", "cinnamon buns", "a cat", "Pepper", "Uppsala", "knitting"),
    Person("Oscar", "Mbeki", "video editor", "The Oakley Sisters", "bunny chow", "a ferret", "Zippy", "Durban", "surfing"),
    Person("Ines", "Carvalho", "UX researcher", "Static Gardens", "bacalhau", "a spaniel", "Nata", "Porto", "open-water swimming"),
    Person("Declan", "Shaw", "sales lead", "Northbound Owls", "Irish stew", "a lurcher", "Rocket", "Galway", "hurling"),
    Person("Yusuf", "Demir", "mobile developer", "The Lemon Tins", "lahmacun", "a cat", "Simit", "Izmir", "photography"),
    Person("Hannah", "Vogel", "finance officer", "Cobalt Parade", "kaiserschmarrn", "a goldfish", "Otto", "Salzburg", "choir singing"),
    Person("Kwame", "Asante", "security engineer", "Wild Juniper", "waakye", "a tabby cat", "Kofi", "Kumasi", "football coaching"),
    Person("Elsa", "Moreau", "producer", "Paper Tide", "ratatouille", "a poodle", "Crouton", "Lyon", "rowing"),
]
LEADS = ["Aiko", "Declan", "Elsa", "Marcus"]


@dataclass
class Event:
    name: str
    booker: str
    venue: str
    street: str
    capacity: int
    date: str
    caterer: str
    dish: str


EVENTS = [
    Event("summer offsite", "Nadia", "Kestrel Hall", "Rowan Street", 80, "14 June", "Figtree Kitchen", "grilled halloumi"),
    Event("winter party", "Jonah", "The Granary Loft", "Millbank Lane", 120, "12 December", "Smoke & Salt", "brisket sliders"),
    Event("Halvard client workshop", "Rosa", "Larkspur Rooms", "Quayside Road", 30, "3 April", "Little Pantry", "mezze platters"),
    Event("spring hackathon", "Samir", "The Foundry Annex", "Ironworks Yard", 60, "22 March", "Noodle Bar Nine", "dan dan noodles"),
    Event("Tidemark launch party", "Elsa", "Orchard House", "Pippin Row", 150, "9 September", "Copper Pot Catering", "mini pies"),
    Event("board dinner", "Hannah", "The Vaulted Room", "Chapel Walk", 18, "27 January", "Maison Clement", "duck confit"),
    Event("charity quiz night", "Declan", "The Crooked Compass", "Harbour Steps", 70, "6 November", "Chip Shack", "fish and chips"),
    Event("design sprint", "Lena", "Studio Meridian", "Canal Wharf", 20, "18 May", "Green Bowl", "grain bowls"),
    Event("new starters' day", "Aiko", "Beacon Lecture Theatre", "College Green", 45, "2 February", "Bread & Butter Co", "sandwich towers"),
    Event("team retreat", "Felix", "Heron Lodge", "Lakeview Drive", 40, "10 October", "Wildfire Suppers", "lamb stew"),
    Event("tenth anniversary party", "Ines", "The Glasshouse", "Botanic Avenue", 200, "1 July", "Saffron & Sage", "paella"),
    Event("Mossgrove partner summit", "Oscar", "Thornfield Conference Centre", "Station Approach", 90, "15 August", "The Long Table", "roast vegetables"),
]


@dataclass
class Project:
    code: str
    client: str
    lead: str
    what: str
    deadline: str
    bug: str  # symptom
    fixer: str
    cause: str
    ticket: str


PROJECTS = [
    Project("Heron", "Halvard Shipping", "Marcus", "a booking portal for cargo slots", "30 April",
            "invoices print with the wrong currency symbol", "Tobias", "a locale setting on the PDF service", "HER-112"),
    Project("Bramble", "Mossgrove Gardens", "Aiko", "a loyalty app for garden centres", "12 June",
            "the points balance resets after an app update", "Yusuf", "a migration that dropped the cache table", "BRM-48"),
    Project("Lodestar", "Tidemark Outdoor", "Elsa", "the launch microsite for a hiking boot", "1 September",
            "the product video stutters on older iPhones", "Oscar", "a bitrate too high for the old decoders", "LDS-9"),
    Project("Quill", "Penhallow Press", "Declan", "an author dashboard for royalties", "20 March",
            "royalty totals are off by a few pennies", "Marcus", "rounding each line instead of the total", "QL-77"),
    Project("Mistral", "Aldercrest Energy", "Marcus", "a meter-reading dashboard", "15 July",
            "the charts freeze when a meter goes offline", "Kwame", "a websocket that never times out", "MST-203"),
    Project("Pebble", "Saltmarsh Dental", "Aiko", "an appointment reminder service", "5 May",
            "patients get each reminder text twice", "Samir", "two cron jobs running on separate servers", "PBL-31"),
    Project("Thistle", "Glenrock Distillery", "Elsa", "a virtual tasting-room site", "30 November",
            "age check accepts any date in the future", "Mei", "the date picker skipping validation", "THS-16"),
    Project("Kestrel", "Northline Rail", "Declan", "a lost-property tracker", "28 February",
            "photos of found items upload sideways", "Yusuf", "EXIF rotation being ignored", "KST-64"),
]

corpus: list[dict] = []
questions: list[dict] = []
people = {p.first: p for p in PEOPLE}


def add(title: str, lines: list[tuple[str, str]]) -> str:
    pid = f"cb{len(corpus) + 1:03d}"
    corpus.append({"id": pid, "title": title, "text": "\n".join(f"{who}: {msg}" for who, msg in lines)})
    return pid


def ask(question: str, gold: list[str], answer: str, anchor: str) -> None:
    questions.append({"id": f"cbq{len(questions):03d}", "question": question, "gold_passage_ids": gold,
                      "hops": len(gold), "answer": answer, "anchor": anchor})


def pick(*options):  # type: ignore[no-untyped-def]
    return rng.choice(options)


DAYS = [f"{d} {m}" for m in ("January", "February", "March", "April", "May", "June", "July", "August",
                             "September", "October", "November") for d in (3, 8, 11, 17, 23, 28)]


def day() -> str:
    return rng.choice(DAYS)


def assign_managers() -> None:
    for i, p in enumerate(PEOPLE):
        lead = LEADS[i % len(LEADS)]
        if lead == p.first:
            lead = LEADS[(i + 1) % len(LEADS)]
        p.manager = lead


def booking_log(e: Event) -> str:
    b = people[e.booker]
    n = NARRATOR
    return add(f"DM {b.handle} / {n}, {day()}", pick(
        [(b.handle, f"good news, {e.venue} is ours for the {e.name} on {e.date}"),
         (n, "amazing, did they want a deposit?"),
         (b.handle, "paid it on the company card this morning, receipt is in the finance folder"),
         (n, f"thanks {b.first}, I'll put it in the calendar")],
        [(n, f"{b.first}, any luck finding a place for the {e.name}?"),
         (b.handle, f"yes! I reserved {e.venue}, they had {e.date} free"),
         (n, "brilliant. how many does it fit?"),
         (b.handle, f"{e.capacity} comfortably"),
         (n, "perfect, that's enough for everyone")],
        [(b.handle, f"signed the contract with {e.venue} for the {e.name}"),
         (n, "oh great, which date did we get?"),
         (b.handle, f"{e.date}, the only Saturday they had left"),
         (n, "fine by me, I'll tell Theo so he can sort the transport"),
         (b.handle, "cheers Priya")]))


def venue_log(e: Event) -> str:
    return add(f"#ops, {day()}", pick(
        [(OPS, f"doing a recce of {e.venue} tomorrow"),
         (NARRATOR, "where is it exactly?"),
         (OPS, f"{e.street}, the red brick building with the green doors"),
         (NARRATOR, "is there parking?"),
         (OPS, "a small car park at the back, and the tram stops right outside")],
        [(NARRATOR, f"Theo, do you have the address of {e.venue} for the invite?"),
         (OPS, f"it's on {e.street}, step-free entrance round the side"),
         (NARRATOR, "thanks, adding it now")],
        [(OPS, f"{e.venue} sent their floor plan, capacity {e.capacity}, load-in from {e.street}"),
         (NARRATOR, "do they have a projector?"),
         (OPS, "two screens and a PA, we only bring the laptops")]))


def catering_log(e: Event) -> str:
    return add(f"#ops, {day()}", pick(
        [(NARRATOR, f"food for the {e.name}: I went with {e.caterer}"),
         (OPS, "the ones we had last year?"),
         (NARRATOR, f"no, new people. they do a great {e.dish}"),
         (OPS, "any vegan options?"),
         (NARRATOR, "yes, and everything is labelled for allergens")],
        [(OPS, f"who's feeding us at the {e.name}?"),
         (NARRATOR, f"{e.caterer}. the tasting was yesterday, the {e.dish} won"),
         (OPS, "nice, send me their invoice details")]))


def favourite_band_log(p: Person) -> str:
    return add(f"DM {NARRATOR} / {p.handle}, {day()}", pick(
        [(p.handle, f"guess who got tickets to see {p.band} in November"),
         (NARRATOR, "no way! aren't they sold out everywhere?"),
         (p.handle, "I queued online for two hours. they've been my favourite band since school"),
         (NARRATOR, "enjoy it, I want a full report")],
        [(NARRATOR, "what are you listening to? I can hear it through your headphones"),
         (p.handle, f"{p.band}, the new album. honestly nobody beats them"),
         (NARRATOR, "I'll give it a go on the commute")],
        [(p.handle, "sorry I was slow today, late night"),
         (NARRATOR, "anything fun?"),
         (p.handle, f"{p.band} played a secret gig, I've loved them for ten years, couldn't miss it"),
         (NARRATOR, "fair enough!")]))


def food_log(p: Person) -> str:
    return add(f"#lunch, {day()}", pick(
        [(NARRATOR, "lunch order going in at 12, shout now"),
         (p.handle, f"if the new place does {p.food} I'm in, it's my favourite thing to eat"),
         (NARRATOR, "they do! adding you"),
         (OPS, "the usual for me")],
        [(p.handle, f"I made {p.food} last night, brought leftovers for anyone who wants some"),
         (NARRATOR, "you're a legend"),
         (p.handle, "it's my comfort food, my dad's recipe")]))


def pet_log(p: Person) -> str:
    return add(f"#random, {day()}", pick(
        [(p.handle, f"working from home today, {p.pet_name} is unwell and needs the vet"),
         (NARRATOR, f"oh no, hope {p.pet_name} feels better soon"),
         (p.handle, f"thanks, {p.pet.split(' ', 1)[1]} are dramatic, probably nothing" if p.pet.startswith("two")
          else f"thanks, it's probably something {p.pet_name} ate")],
        [(p.handle, f"photo of the day: {p.pet_name} asleep on my keyboard"),
         (NARRATOR, "adorable. is that why your last message was just the letter j"),
         (p.handle, f"yes. {p.pet} is a terrible coworker")],
        [(NARRATOR, "who's bringing their pet to bring-your-pet Friday?"),
         (p.handle, f"me, {p.pet_name} is coming. {p.pet}, very well behaved"),
         (OPS, "I'll buy a lint roller")]))


def hometown_log(p: Person) -> str:
    return add(f"DM {NARRATOR} / {p.handle}, {day()}", pick(
        [(p.handle, "can I take the Friday before the bank holiday?"),
         (NARRATOR, "should be fine, going anywhere nice?"),
         (p.handle, f"home to {p.hometown}, where I grew up. my mum's birthday"),
         (NARRATOR, "lovely, approved")],
        [(NARRATOR, "how was the long weekend?"),
         (p.handle, f"went back to {p.hometown}, saw all my school friends"),
         (NARRATOR, "is that where you're from?"),
         (p.handle, "born and raised")]))


def hobby_log(p: Person) -> str:
    return add(f"#random, {day()}", pick(
        [(p.handle, f"anyone want to try {p.hobby}? I go every Thursday"),
         (NARRATOR, "I'd love to but Thursdays are my choir night"),
         (p.handle, "next time then")],
        [(NARRATOR, f"{p.first}, how's the {p.hobby} going?"),
         (p.handle, "slowly! but I'm hooked"),
         (NARRATOR, "we want pictures")]))


def reorg_log(group: list[Person]) -> str:
    lines = [(NARRATOR, "org chart update after the reshuffle, please check your line:")]
    for p in group:
        lines.append((NARRATOR, pick(f"{p.full} now reports to {p.manager}",
                                     f"{p.full} -> {p.manager}'s team",
                                     f"{p.first}'s manager is {p.manager} from this week")))
    lines.append((OPS, "thanks Priya, I'll update the leave approvals"))
    return add(f"#announcements, {day()}", lines)


def kickoff_log(pr: Project) -> str:
    lead = people[pr.lead]
    return add(f"#projects, {day()}", pick(
        [(NARRATOR, f"we won the {pr.client} pitch! project name: {pr.code}"),
         (lead.handle, f"I'll lead it. scope is {pr.what}"),
         (OPS, f"deadline?"),
         (lead.handle, f"{pr.deadline}, tight but doable")],
        [(lead.handle, f"kickoff notes for {pr.code}: the client is {pr.client}, they want {pr.what}"),
         (NARRATOR, f"who's running it day to day?"),
         (lead.handle, "me, I'm the lead. first demo in three weeks")]))


def bug_log(pr: Project) -> str:
    fixer = people[pr.fixer]
    tester = people["Mei"] if pr.fixer != "Mei" else people["Tobias"]
    return add(f"#{pr.code.lower()}-dev, {day()}", pick(
        [(tester.handle, f"{pr.ticket}: {pr.bug}"),
         (fixer.handle, "I'll take it"),
         (fixer.handle, f"found it: {pr.cause}. fix is on the branch"),
         (NARRATOR, f"thanks {fixer.first}, I'll let {pr.client} know")],
        [(NARRATOR, f"{pr.client} called, {pr.bug}"),
         (fixer.handle, f"known issue, {pr.ticket}. it was {pr.cause}"),
         (fixer.handle, "deployed the fix ten minutes ago"),
         (NARRATOR, "you're a star")]))


def travel_log(p: Person, city: str, conf: str) -> str:
    return add(f"DM {NARRATOR} / {p.handle}, {day()}", pick(
        [(p.handle, f"can you book my train to {city} for {conf}?"),
         (NARRATOR, "sure, outbound Tuesday morning?"),
         (p.handle, "yes please, and a hotel near the venue")],
        [(NARRATOR, f"your hotel for {conf} is booked, two nights in {city}"),
         (p.handle, "thank you! I'm giving a talk on the Wednesday"),
         (NARRATOR, "break a leg")]))


# recurring topics, written by hand: (title, lines, question, answer, anchor) or no question
SMALL_TALK = [
    ("#office, 4 March", [(NARRATOR, "the coffee machine on floor two is broken again"),
                          (OPS, "I called the repair firm, Brewtech, they come Thursday"),
                          (NARRATOR, "until then, the kettle lives")],
     "Which company repairs the broken coffee machine?", "Brewtech", "coffee machine"),
    ("#office, 19 March", [(OPS, "coffee machine is fixed, it was a blocked milk pipe"),
                           (NARRATOR, "hero. who do we thank?"),
                           (OPS, "the repair engineer, he left a cleaning schedule on the fridge")],
     "What was wrong with the coffee machine?", "milk pipe", "coffee"),
    ("#office, 2 May", [(NARRATOR, "coffee machine has a new bean hopper, the old one cracked"),
                        (OPS, "good, the decaf now has its own slot too")], None, None, None),
    ("#office, 7 April", [(NARRATOR, "the big printer jams on double-sided jobs"),
                          (OPS, "use the one by the kitchen for now, the lease company sends a new drum"),
                          (NARRATOR, "noted")],
     "Which printer should we use while the big one is broken?", "kitchen", "printer"),
    ("#office, 21 June", [(OPS, "printer toner is on the shelf above the shredder now"),
                          (NARRATOR, "thanks, moved the paper there too")],
     "Where is the spare toner kept?", "shredder", "toner"),
    ("#office, 13 January", [(NARRATOR, "parking: from Monday the car park needs the new permits"),
                             (OPS, "how do people get one?"),
                             (NARRATOR, "fill in the form on the intranet, Hannah approves them"),
                             ("HannahVogel", "I'll try to do them within a day")],
     "Who approves the new car park permits?", "Hannah", "permit"),
    ("#office, 9 February", [(OPS, "the bike shed gets a lock with a code, not keys"),
                             (NARRATOR, "what's the code?"),
                             (OPS, "I'll DM it, not putting it in a channel")], None, None, None),
    ("#office, 26 February", [(NARRATOR, "fire drill on Wednesday at 11"),
                              (OPS, "assembly point is the church car park this time, not the square"),
                              (NARRATOR, "because of the market?"),
                              (OPS, "exactly")],
     "Where do we assemble during the fire drill?", "church car park", "fire drill"),
    ("#office, 14 October", [(NARRATOR, "second fire drill of the year on Friday, 3pm"),
                             (OPS, "same as last time, but the lifts are switched off from 2:50")],
     "When are the lifts switched off for the autumn fire drill?", "2:50", "lifts"),
    ("#office, 3 August", [(NARRATOR, "wifi is being upgraded tonight, expect an outage after 8"),
                           ("SamirKaur", "the new access points support the guest network too"),
                           (NARRATOR, "finally, visitors kept asking")],
     "What does the new wifi finally offer visitors?", "guest network", "access points"),
    ("#office, 30 September", [(NARRATOR, "plants on the third floor need watering while I'm away"),
                               ("GretaLindholm", "I'll do it, the fern and the big monstera?"),
                               (NARRATOR, "and the cactus, but only once a fortnight")],
     "How often should the cactus be watered?", "once a fortnight", "cactus"),
    ("#bookclub, 18 February", [(NARRATOR, "book club this month: The Lighthouse Accounts"),
                                ("GretaLindholm", "I picked it, it's about a bookkeeper on a remote island"),
                                ("JonahPike", "finished it on the train, no spoilers")],
     "Which book did the book club read about a bookkeeper?", "The Lighthouse Accounts", "bookkeeper"),
    ("#bookclub, 20 March", [(NARRATOR, "next book club pick is Winter Orchard"),
                             ("InesCarvalho", "my choice this time, it's a family saga set in Porto"),
                             (NARRATOR, "meeting in the small room, bring snacks")],
     "Which book club pick is a family saga?", "Winter Orchard", "saga"),
    ("#standup, 5 January", [(NARRATOR, "standup moves to 9:45 from next week"),
                             (OPS, "why the change?"),
                             (NARRATOR, "the school run, half the team asked for it")],
     "Why was the morning standup moved?", "school run", "standup"),
    ("#expenses, 29 April", [("HannahVogel", "reminder: expense claims for April close on Friday"),
                             (NARRATOR, "do receipts need to be originals?"),
                             ("HannahVogel", "a photo in the app is enough, keep the paper for six months")],
     "How long do we keep paper receipts?", "six months", "receipts"),
    ("#expenses, 30 May", [("HannahVogel", "mileage rate goes up to 48p per mile from June"),
                           (NARRATOR, "good news for the site visits"),
                           (OPS, "finally")],
     "What is the new mileage rate?", "48p", "mileage"),
    ("#random, 11 July", [(NARRATOR, "ice cream van outside at 3, I'm buying"),
                          (OPS, "you're the best office manager we've ever had"),
                          ("LenaOkafor", "mint choc chip please")], None, None, None),
    ("#random, 22 August", [(OPS, "who left a tray of brownies in the kitchen?"),
                            ("NadiaHaddad", "me! my nephew's baking phase"),
                            (NARRATOR, "tell him they're excellent")],
     "Whose nephew baked the brownies in the kitchen?", "Nadia", "brownies"),
    ("#random, 4 September", [(NARRATOR, "lost and found: a blue umbrella and one glove"),
                              ("FelixAmsel", "the glove is mine, left it after the gig"),
                              (NARRATOR, "it's on my desk")], None, None, None),
    ("#it, 16 May", [("SamirKaur", "laptops get the new VPN client this weekend"),
                     (NARRATOR, "do people need to do anything?"),
                     ("SamirKaur", "restart on Monday and sign in with the authenticator app")],
     "What must people do on Monday after the VPN client update?", "authenticator", "VPN"),
    ("#it, 2 October", [("KwameAsante", "phishing test results: 6 people clicked the fake parcel link"),
                        (NARRATOR, "was I one of them"),
                        ("KwameAsante", "no comment. training session next Tuesday")],
     "How many people clicked the fake link in the phishing test?", "6 people", "phishing"),
    ("#it, 20 November", [("KwameAsante", "password manager licences renewed for two more years"),
                          (OPS, "same vendor?"),
                          ("KwameAsante", "yes, Keyward, they gave us a discount")],
     "Which vendor supplies the password manager?", "Keyward", "password manager"),
    ("#announcements, 1 March", [(NARRATOR, "welcome Ines Carvalho, our new UX researcher, joining from a bank in Porto"),
                                 (OPS, "welcome Ines!"),
                                 ("InesCarvalho", "thank you all, happy to be here")],
     "Where did the new UX researcher work before joining?", "a bank", "UX researcher"),
    ("#announcements, 30 June", [(NARRATOR, "the office closes at 2pm on the last Friday of July for the staff picnic"),
                                 (OPS, "picnic in Alder Park, bring a blanket")],
     "Where is the staff picnic held?", "Alder Park", "picnic"),
    ("#announcements, 12 September", [(NARRATOR, "we're switching payroll provider to Ledgerline in October"),
                                      ("HannahVogel", "payslips will arrive by email, not on paper")],
     "How will payslips arrive after the payroll switch?", "by email", "payslips"),
    ("#office, 23 November", [(NARRATOR, "secret santa: limit is 15 pounds, names drawn Monday"),
                              (OPS, "and no more novelty socks please")],
     "What is the spending limit for secret santa?", "15 pounds", "secret santa"),
    ("#office, 6 December", [(NARRATOR, "office closed from 23 December to 2 January"),
                             (OPS, "I'll turn the heating down over the break")], None, None, None),
    ("#random, 15 April", [("DeclanShaw", "five-a-side tonight, we need one more player"),
                           ("KwameAsante", "I'm in, I'll bring the bibs"),
                           (NARRATOR, "don't break anything, the first aid kit is empty")],
     "Who brings the bibs for five-a-side?", "Kwame", "five-a-side"),
    ("#office, 25 January", [(NARRATOR, "first aid kit restocked, and Felix and Greta did the first aid course"),
                             (OPS, "so they're our first aiders now?"),
                             (NARRATOR, "yes, names on the poster by the lift")],
     "Who are the office first aiders?", "Felix and Greta", "first aid"),
    ("#random, 8 March", [(OPS, "the meeting room booking screens are live"),
                          (NARRATOR, "no more fights over the Blue Room then"),
                          (OPS, "you can book up to two weeks ahead")],
     "How far ahead can meeting rooms be booked?", "two weeks", "booking screens"),
]


# the hubs' own lives: questions that name a speaker of nearly every log, where only the rest of the
# question's words find the log
HUB_TALK = [
    ("DM PriyaNandakumar / GretaLindholm, 14 March",
     [("GretaLindholm", "how was the wedding?"),
      (NARRATOR, "beautiful! my sister finally married Arjun, the ceremony was on a houseboat in Kochi"),
      ("GretaLindholm", "a houseboat! did anyone fall in?"),
      (NARRATOR, "only my uncle's sandal")],
     "Where did Priya's sister have her wedding ceremony?", "houseboat", "sister"),
    ("#random, 2 June", [(NARRATOR, "my allotment finally produced something: 4 kilos of tomatoes"),
                         (OPS, "Priya's salsa day incoming"),
                         (NARRATOR, "they're on the kitchen table, help yourselves")],
     "How many kilos of tomatoes did Priya's allotment produce?", "4 kilos", "allotment"),
    ("DM PriyaNandakumar / JonahPike, 19 September",
     [("JonahPike", "are you doing the half marathon again?"),
      (NARRATOR, "yes, the Riverside Half on 12 October, I want to get under two hours this time"),
      ("JonahPike", "I'll be at mile 9 with jelly babies")],
     "What time is Priya aiming for in her half marathon?", "under two hours", "half marathon"),
    ("#random, 27 April", [(NARRATOR, "I've started Portuguese lessons, Ines is my unofficial tutor"),
                           ("InesCarvalho", "she already orders coffee better than my cousins"),
                           (OPS, "obrigado?")],
     "Which language is Priya learning?", "Portuguese", "lessons"),
    ("DM PriyaNandakumar / TheoMarsh, 5 October",
     [(OPS, "taking Friday off, the movers come for the new flat"),
      (NARRATOR, "finally! which area did you go for?"),
      (OPS, "Harbourside, ten minutes' walk to the office, no more bus"),
      (NARRATOR, "housewarming when?")],
     "Which neighbourhood is Theo moving to?", "Harbourside", "movers"),
    ("#random, 16 June", [(OPS, "my daughter is the lion in her school play tonight"),
                          (NARRATOR, "the Wizard of Oz one?"),
                          (OPS, "yes, she's practised the roar for a month"),
                          (NARRATOR, "video or it didn't happen")],
     "Which part does Theo's daughter play in the school play?", "lion", "daughter"),
    ("#random, 30 April", [(OPS, "the motorbike passed its MOT, the old Triumph lives on"),
                           (NARRATOR, "how old is it now?"),
                           (OPS, "older than Yusuf, built in 1989")],
     "In which year was Theo's motorbike built?", "1989", "motorbike"),
    ("DM PriyaNandakumar / TheoMarsh, 21 January",
     [(NARRATOR, "do you still carpool on Mondays?"),
      (OPS, "with Kwame, yes, he drives and I pay for petrol"),
      (NARRATOR, "can I join from the ring road?"),
      (OPS, "I'll ask him, the back seat is full of football cones")],
     "Who does Theo share a car with on Mondays?", "Kwame", "carpool"),
]


def build() -> None:
    assign_managers()
    ev = {e.name: {"booking": booking_log(e), "venue": venue_log(e), "catering": catering_log(e)} for e in EVENTS}
    band = {p.first: favourite_band_log(p) for p in PEOPLE}
    food = {p.first: food_log(p) for p in PEOPLE[::2]}
    pet = {p.first: pet_log(p) for p in PEOPLE}
    home = {p.first: hometown_log(p) for p in PEOPLE}
    hobby = {p.first: hobby_log(p) for p in PEOPLE[1::2]}
    reorg = {}
    order = [p for p in PEOPLE if p.first not in LEADS] + [p for p in PEOPLE if p.first in LEADS]
    for i in range(0, len(order), 3):
        group = order[i:i + 3]
        pid = reorg_log(group)
        reorg.update({p.first: pid for p in group})
    kick = {pr.code: kickoff_log(pr) for pr in PROJECTS}
    bug = {pr.code: bug_log(pr) for pr in PROJECTS}
    confs = [("Lena", "Bristol", "the Type & Space conference"), ("Marcus", "Berlin", "PyCon DE"),
             ("Ines", "Amsterdam", "the UX Summit"), ("Kwame", "Manchester", "the SecureOps meetup"),
             ("Oscar", "Glasgow", "the Edit Festival"), ("Mei", "Edinburgh", "the Testing Gala"),
             ("Yusuf", "Lisbon", "the Mobile Dev Days"), ("Declan", "Dublin", "the Sales Forum")]
    travel = {first: travel_log(people[first], city, conf) for first, city, conf in confs}
    talk = {}
    for title, lines, question, answer, anchor in SMALL_TALK:
        pid = add(title, lines)
        if question:
            talk[question] = (pid, answer, anchor)

    # single hop
    for i, e in enumerate(EVENTS):
        b = people[e.booker]
        if i % 3 == 0:
            ask(f"Who found the venue for the {e.name}?", [ev[e.name]["booking"]], b.first, e.name)
        elif i % 3 == 1:
            ask(f"Which caterer is doing the food for the {e.name}?", [ev[e.name]["catering"]], e.caterer, e.name)
        else:
            ask(f"What street is {e.venue} on?", [ev[e.name]["venue"]], e.street, e.venue)
    for i, p in enumerate(PEOPLE):
        if i % 3 == 0:
            ask(f"What kind of music does {p.full} love most?", [band[p.first]], p.band, p.handle)
        elif i % 3 == 1:
            ask(f"What is the name of {p.first}'s pet?", [pet[p.first]], p.pet_name, p.handle)
        else:
            ask(f"Which town is {p.full} originally from?", [home[p.first]], p.hometown, p.handle)
    for i, pr in enumerate(PROJECTS):
        ask(pick(f"Which client is the {pr.code} project for?", f"Who commissioned project {pr.code}?"),
            [kick[pr.code]], pr.client, pr.code)
        ask(f"What was behind the bug where {pr.bug}?", [bug[pr.code]], pr.cause.split(" ", 1)[1], pr.ticket)
    for first in ("Lena", "Kwame", "Yusuf"):
        ask(f"Which city is {people[first].full} travelling to for a conference?", [travel[first]],
            next(c for f, c, _ in confs if f == first), people[first].handle)
    for first in ("Tobias", "Rosa"):
        ask(f"Who is {people[first].full}'s line manager now?", [reorg[first]], people[first].manager,
            people[first].full)
    for question, (pid, answer, anchor) in talk.items():
        ask(question, [pid], answer, anchor)
    hub = {}
    for title, lines, question, answer, anchor in HUB_TALK:
        pid = add(title, lines)
        hub[question] = pid
        ask(question, [pid], answer, anchor)

    # multi-hop: through the booker, the venue, a project's lead or bug fixer
    for e in EVENTS[:5]:
        b = people[e.booker]
        ask(f"What is the favourite band of the person who booked the venue for the {e.name}?",
            [ev[e.name]["booking"], band[b.first]], b.band, e.name)
    for e in EVENTS[5:9]:
        ask(f"On which street is the place we booked for the {e.name}?",
            [ev[e.name]["booking"], ev[e.name]["venue"]], e.street, e.name)
    for pr in PROJECTS[:4]:
        lead = people[pr.lead]
        ask(f"What is the name of the pet owned by the lead of the {pr.client} project?",
            [kick[pr.code], pet[lead.first]], lead.pet_name, pr.client)
    for pr in PROJECTS[4:8]:
        fixer = people[pr.fixer]
        ask(f"Where did the engineer who fixed {pr.ticket} grow up?", [bug[pr.code], home[fixer.first]],
            fixer.hometown, pr.ticket)
    kwame = people["Kwame"]
    carpool = hub["Who does Theo share a car with on Mondays?"]
    ask("What is the name of the pet of the colleague Theo carpools with?", [carpool, pet["Kwame"]],
        kwame.pet_name, "carpool")
    ask("Where did Priya's Portuguese tutor grow up?", [hub["Which language is Priya learning?"], home["Ines"]],
        people["Ines"].hometown, "Portuguese lessons")
    for e in EVENTS[9:11]:
        b = people[e.booker]
        ask(f"Who manages the colleague who booked the venue for the {e.name}?",
            [ev[e.name]["booking"], reorg[b.first]], b.manager, e.name)


def check() -> None:
    text = {c["id"]: c["title"] + "\n" + c["text"] for c in corpus}
    problems = []
    for q in questions:
        gold = q["gold_passage_ids"]
        if q["answer"] not in text[gold[-1]]:
            problems.append(f"{q['id']}: answer {q['answer']!r} not in its last gold log")
        if q["anchor"] not in text[gold[0]]:
            problems.append(f"{q['id']}: anchor {q['anchor']!r} not in its first gold log")
        for pid, body in text.items():
            if pid not in gold and q["answer"] in body and q["anchor"] in body:
                problems.append(f"{q['id']}: {pid} outside the gold holds {q['answer']!r} and {q['anchor']!r}")
    if problems:
        raise SystemExit("\n".join(problems))


def main() -> None:
    build()
    check()
    order = corpus[:]
    rng.shuffle(order)
    with (HERE / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for c in order:
            out.write(json.dumps(c, ensure_ascii=False) + "\n")
    with (HERE / "questions.jsonl").open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(json.dumps(q, ensure_ascii=False) + "\n")
    multi = sum(q["hops"] >= 2 for q in questions)
    share = sum(NARRATOR in c["text"] for c in corpus) / len(corpus)
    print(f"{len(corpus)} logs, {len(questions)} questions ({multi} multi-hop); narrator in {share:.0%}")


if __name__ == "__main__":
    main()
