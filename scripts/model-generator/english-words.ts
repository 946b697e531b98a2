/**
 * Common English words and word pieces for the generated WordPiece vocabulary, so that ordinary
 * English text tokenizes into whole words instead of single characters. Written for this project
 * (a frequency-ordered general list, lowercase ASCII), not copied from any model's vocabulary.
 */

const WORDS = `
the of and to a in is it you that he was for on are with as i his they be at one have this
from or had by not word but what some we can out other were all there when up use your how said
an each she which do their time if will way about many then them write would like so these her
long make thing see him two has look more day could go come did number sound no most people my
over know water than call first who may down side been now find any new work part take get place
made live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read
hand port large spell add even land here must big high such follow act why ask men change went
light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover
food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both mark
often letter until mile river car feet care second book carry took science eat room friend began
idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave
song measure door product black short numeral class wind question happen complete ship area half
rock order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power
town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest
correct able pound done beauty drive stood contain front teach week final gave green oh quick
develop ocean warm free minute strong special mind behind clear tail produce fact street inch
multiply nothing course stay wheel full force blue object decide surface deep moon island foot
system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language
among grand ball yet wave drop heart am present heavy dance engine position arm wide sail material
size vary settle speak weight general ice matter circle pair include divide syllable felt perhaps
pick sudden count square reason length represent art subject region energy hunt probable bed
brother egg ride cell believe fraction forest sit race window store summer train sleep prove lone
leg exercise wall catch mount wish sky board joy winter sat written wild instrument kept glass
grass cow job edge sign visit past soft fun bright gas weather month million bear finish happy
hope flower clothe strange gone jump baby eight village meet root buy raise solve metal whether
push seven paragraph third shall held hair describe cook floor either result burn hill safe cat
century consider type law bit coast copy phrase silent tall sand soil roll temperature finger
industry value fight lie beat excite natural view sense ear else quite broke case middle kill son
lake moment scale loud spring observe child straight consonant nation dictionary milk speed method
organ pay age section dress cloud surprise quiet stone tiny climb cool design poor lot experiment
bottom key iron single stick flat twenty skin smile crease hole trade melody trip office receive
row mouth exact symbol die least trouble shout except wrote seed tone join suggest clean break
lady yard rise bad blow oil blood touch grew cent mix team wire cost lost brown wear garden equal
sent choose fell fit flow fair bank collect save control decimal gentle woman captain practice
separate difficult doctor please protect noon whose locate ring character insect caught period
indicate radio spoke atom human history effect electric expect crop modern element hit student
corner party supply bone rail imagine provide agree thus capital chair danger fruit rich thick
soldier process operate guess necessary sharp wing create neighbor wash bat rather crowd corn
compare poem string bell depend meat rub tube famous dollar stream fear sight thin triangle planet
hurry chief colony clock mine tie enter major fresh search send yellow gun allow print dead spot
desert suit current lift rose continue block chart hat sell success company subtract event
particular deal swim term opposite wife shoe shoulder spread arrange camp invent cotton born
determine quart nine truck noise level chance gather shop stretch throw shine property column
molecule select wrong gray repeat require broad prepare salt nose plural anger claim continent
oxygen sugar death pretty skill women season solution magnet silver thank branch match suffix
especially fig afraid huge sister steel discuss forward similar guide experience score apple
bought led pitch coat mass card band rope slip win dream evening condition feed tool total basic
smell valley nor double seat arrive master track parent shore division sheet substance favor
connect post spend chord fat glad original share station dad bread charge proper bar offer segment
slave duck instant market degree populate chick dear enemy reply drink occur support speech nature
range steam motion path liquid log meant quotient teeth shell neck
a an the this that these those some any no every each all both either neither
i me my mine myself you your yours yourself he him his himself she her hers herself it its itself
we us our ours ourselves they them their theirs themselves who whom whose which what whatever
is am are was were be been being do does did done doing have has had having will would shall
should can could may might must ought not no yes
and or but nor so yet for because although though while whereas unless until since if whether
in on at by with without within into onto upon from to of off out over under above below between
among through throughout across along around about against before after during toward towards
near beyond behind beside besides inside outside despite via per than like unlike
very really quite rather too also just only even still already soon now then today tomorrow
yesterday tonight here there where when why how always never sometimes usually often ever again
once twice almost nearly perhaps maybe probably certainly actually simply finally recently
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
thousand million billion first second third fourth fifth last next
monday tuesday wednesday thursday friday saturday sunday january february march april may june
july august september october november december spring summer autumn fall winter
year years month months week weeks day days hour hours minute minutes second seconds time times
morning afternoon evening night weekend today date
people person man men woman women child children boy girl baby family friend friends mother father
parent parents son daughter brother sister husband wife king queen student teacher doctor worker
government company business market money price cost value service services system systems program
programs problem problems question questions answer answers fact facts example examples result
results information data report reports research study studies case cases point points issue
issues reason reasons way ways thing things part parts place places area areas world country
countries city cities state states nation community group groups member members team teams
school schools university college class education student students job jobs work office home
house room rooms door window car cars road street town village building water food air fire
light power energy health life death love war peace law rule rules policy right rights
art music film movie book books story stories news game games sport sports ball player players
computer computers software internet website web page email phone network technology code model
models language languages text word words sentence sentences name names number numbers list
lists letter letters message messages document documents file files image images picture video
user users customer customers client product products order orders account accounts email
is was are were has have had said says say make makes made making take takes took taken taking
go goes went gone going come comes came coming see sees saw seen seeing know knows knew known
get gets got getting give gives gave given giving find finds found finding think thinks thought
tell tells told become becomes became leave leaves left feel feels felt bring brings brought
begin begins began begun keep keeps kept hold holds held write writes wrote written stand stands
stood hear hears heard let lets mean means meant set sets meet meets met run runs ran pay pays paid
sit sits sat speak speaks spoke spoken lie lies lay lead leads led read reads grow grows grew
grown lose loses lost fall falls fell fallen send sends sent build builds built understand
understood draw draws drew drawn break breaks broke broken spend spends spent cut cuts rise rose
drive drives drove driven buy buys bought wear wore worn choose chose chosen seek sought throw
threw thrown catch caught deal dealt win wins won
want wants wanted need needs needed use uses used using look looks looked looking seem seems seemed
try tries tried trying ask asks asked work works worked working call calls called help helps
helped talk talks talked turn turns turned start starts started show shows showed shown play plays
played move moves moved live lives lived believe believed happen happens happened provide provides
provided include includes included including continue continued change changes changed learn
learned add added open opened walk walked offer offered remember remembered consider considered
appear appeared wait waited serve served die died expect expected stay stayed reach reached
kill killed remain remained suggest suggested raise raised pass passed sell sold require required
report reported decide decided pull pulled return returned explain explained hope hoped develop
developed carry carried create created love loved like liked jump jumps jumped jumping
good better best bad worse worst new old young big small large little long short high low great
important different same other own few many much more most less least early late easy hard
possible able free full sure real true false whole right wrong left clear simple strong weak
happy sad nice fine beautiful pretty ugly hot cold warm cool dark bright light heavy fast slow
quick lazy rich poor cheap expensive safe dangerous clean dirty empty busy quiet loud public private
local national international human social political economic natural special general common
certain main major minor recent final whole single similar various available likely ready
black white red blue green yellow brown orange purple pink gray grey
fox dog dogs cat cats bird birds fish horse cow pig sheep mouse animal animals tree trees flower
flowers
hello hi goodbye thanks thank please sorry okay ok welcome
mr mrs ms dr st
america american england english britain british france french germany german china chinese japan
japanese india europe european africa african asia london paris york washington california
un re dis pre non mis sub super inter over under out
token tokens encode encoder encoding embedding embeddings classify classification vector vectors search
query server client request response input output text sentence label labels score scores
`;

/** Frequent continuation pieces (suffixes), written with the WordPiece `##` prefix. */
const SUFFIX_PIECES = `
##s ##es ##ed ##d ##ing ##ings ##er ##ers ##est ##ly ##y ##ies ##ied ##ness ##ment ##ments
##tion ##tions ##sion ##ation ##ations ##able ##ible ##al ##ally ##ial ##ful ##fully ##less ##ity
##ities ##ous ##ive ##ize ##ized ##izes ##ise ##ism ##ist ##ists ##ic ##ical ##en ##ened ##ship
##hood ##ward ##wards ##an ##ian ##ians ##ans ##ry ##ery ##or ##ors ##ant ##ent ##ence ##ance
##ency ##age ##ate ##ated ##ating ##ure ##th ##ty ##ish ##ling ##let ##dom ##ee ##ette ##ify
##ified ##ine ##ion ##ions ##ar ##ary ##ory ##ble ##le ##el ##et ##on ##in ##ie ##ment ##ne
`;

function splitList(text: string): string[] {
  return text.split(/\s+/).filter((word) => word.length > 0);
}

export const ENGLISH_WORDS: readonly string[] = splitList(WORDS);
export const SUFFIX_WORD_PIECES: readonly string[] = splitList(SUFFIX_PIECES);
